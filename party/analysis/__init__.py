"""WOE/IV analysis of each party's columns against the active party's binary label
(`vfl analyze`, and `features.select` before training; docs/usage.md, "Analysis: WOE and
IV").

    woe        WOE per bin and IV per column from counts (the smoothing), monotone
               merging, selection by IV
    binning    a party's WOE bins of its own columns (the trees' bins) and every row's bin
    result     the columns as the result reports them (`vfl.v1.ColumnAnalysis`)
    protocol   the exchange: a passive party's counts through the encrypted bucket sums
    sharing    who learns what (`analysis:` in the party config)
    run        one party's analysis: bins, exchange, report, the columns kept
    job        an analysis job at one party
"""
