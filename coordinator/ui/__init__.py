"""The coordinator's read-only web dashboard (`vfl coordinator serve --ui`): the job list,
a job's curves while it trains, the parties' health, the models.

`server` serves it (aiohttp, on the coordinator's event loop), `auth` decides who gets in
(a token printed at start, or a federation client certificate), `dashboard` is its read
model over the coordinator's store, life cycle and health monitor, and `static/` holds
the page, its script and style and the vendored chart library (uPlot, MIT): nothing is
fetched from elsewhere, so it works air-gapped.

    UiServer, parse_listen   the dashboard's server and its `--ui HOST:PORT`
    Dashboard                its read model
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
