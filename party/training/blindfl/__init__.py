"""`protocol: blindfl`: federated source layers, then B's top model (docs/protocols.md).

No party holds a plaintext model over another's features. Passive parties' dense features
go through the MatMul source layer (`secure.source_layers.matmul`), their categorical fields
(`data.categorical`) through the Embed-MatMul layer (`secure.source_layers.embed`); B learns
Z = X_A W_A + X_B W_B + b (+ Z_emb) and runs the top model in plaintext; passive parties
only ever see ciphertexts. At setup each passive party tells B its layout (sizes only).

Local updates (docs/protocols.md §6): B runs CELU in full on cached (Z, G): the top
model and its own share; a passive party re-applies cached encrypted steps [[lr G]] of the
MatMul layer homomorphically, with uniform sampling and weight 1.
"""

from vfl.party.training.blindfl.active import BlindActiveTrainer
from vfl.party.training.blindfl.passive import BlindPassiveTrainer

__all__ = ["BlindActiveTrainer", "BlindPassiveTrainer"]
