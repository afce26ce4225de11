"""The typed table reader: a dataset's CSV or Parquet file, over pyarrow.

    scan      `scan_table`, `scan_arrow`: a file (or rows in memory) streamed batch by
              batch into a party's buffers; what jobs, predictions and scoring read with
    buffers   Arrow batches into those buffers: ids as text, the label, numbers as
              float32, words as int32 codes (`Scanned`)
    whole     `read_table`: a file read whole as one Arrow table (describe; naming a bad
              cell)
    columns   `ReadTable`: such a table's columns by name, as ids, numbers, codes or words
    files     a dataset's file: its path, its header, the errors that name it

Import from the module (`from vfl.party.tables.reader.scan import scan_table`).
"""
