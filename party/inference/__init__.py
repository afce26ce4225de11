"""Scoring with stored models: batch prediction jobs and online scoring.

PredictJob       a batch prediction at one party: PSI, then the stored model (`batch`)
LoadedModel      one party's part of a stored model, loaded to score (`model`)
OnlineScoring    online scoring at a party daemon: sessions per model (`online`)
ServedModel      one model served at its active party, micro-batched (`serving`)
Prediction, IdResult   what online scoring answers, per request and per id
ActiveSession, PassiveSession   a scoring session's two sides (`session`)
Rows, RowSource  where a party looks ids up to score online: its serving tables, then the
                 model's training table (`rows`)
MicroBatcher     concurrent requests gathered into batches (`batcher`)
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
