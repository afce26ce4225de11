"""A party's tables, read and prepared at home: nothing here leaves the party.

    table        `RawTable` (a dataset before preprocessing, its `RawColumn`s) and `Table`
                 (the model's inputs); `with_columns`
    load         `read_raw`: a dataset (CSV, Parquet, LIBSVM) as a `RawTable`; `raw_rows`
                 for rows in memory; `load_table`: read, fitted and applied on every row
    libsvm       LIBSVM files as a CSR matrix
    reader/      the typed table reader over pyarrow: CSV (multi-threaded) and Parquet,
                 ids and labels, numbers or words per column, bad cells named
    preprocess/  preprocessing fitted on a job's training rows, kept in the model part and
                 applied identically wherever the model scores; drift counters
    sql          a PostgreSQL query as a dataset: a job's Parquet snapshot
    sql_lookup   online scoring's look-up of such a dataset by id
    describe     `vfl data describe`: a dataset's columns summarised at the party

Import from the module (`from vfl.party.tables.load import read_raw`).
"""
