"""A party's tables, read and prepared at home: nothing here leaves the party.

    reader       one typed reader over pyarrow: CSV (multi-threaded) and Parquet, ids and
                 labels, numbers or words per column, bad cells named
    columns      a table's columns by name, in constant time
    data         `RawTable` (a dataset before preprocessing) and `Table`; loading, LIBSVM
    preprocess   preprocessing fitted on a job's training rows, kept in the model part and
                 applied identically wherever the model scores; drift counters
    sql          a PostgreSQL query as a dataset: a job's Parquet snapshot
    sql_lookup   online scoring's look-up of such a dataset by id
    describe     `vfl data describe`: a dataset's columns summarised at the party

Import from the module (`from vfl.party.tables.data import read_raw`).
"""
