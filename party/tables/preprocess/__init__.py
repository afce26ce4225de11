"""Per-party preprocessing: fitted on the party's own training rows, kept with its model
part, applied identically in training, validation, batch prediction and online scoring.

    fit           `fit`: a dataset's preprocessing learnt from its training rows (the
                  modes: auto, zscore, none); `check_secure_bounds`
    preprocessor  `Preprocessor`: one dataset's fitted preprocessing, and `apply`
    fitted        one column's fitted preprocessing (`Numeric`, `Categorical`, `Ignored`,
                  `SparseScales`) and how it turns raw cells into model inputs
    bins          a tree model's: `Binned` (quantile bins of a numeric column),
                  `fit_bins` (every column as bins; words as their most frequent ones)
    drift         `Drift`: what applying counts (out of range, unknown, unexpected empty)

Import from the module (`from vfl.party.tables.preprocess.fit import fit`).
"""
