"""BlindFL's source layers: the first layer of a model whose weights no party holds.

    matmul          the MatMul layer over dense or sparse features (docs/protocols.md §4)
    embed           the Embed-MatMul layer over categorical fields (docs/protocols.md §5)
    steps           the MatMul layer's optimisers (`SourceOptimizer`, per-feature steps)
    state           a layer's state as plain values for checkpoints, and a key pair's
    crypto          a party's key pair, Paillier contexts and obfuscator pools
    role            `LayerRole`: what every role of both layers is built on
    seeds, sharing  pair seeds and masks shared by both layers
    common, checks  the packing, messages and input checks both layers use

Each layer has an active role (party B, which holds the labels) and a passive role
(each party A_k); they exchange ciphertexts over a `Channel`.
"""

from vfl.secure.source_layers.crypto import keep_saved_tables
from vfl.secure.source_layers.embed import ActiveEmbedLayer, PassiveEmbedLayer, VocabularyError
from vfl.secure.source_layers.matmul import ActiveSourceLayer, PassiveSourceLayer
from vfl.secure.source_layers.state import LayerState, keypair_from_state, keypair_state
from vfl.secure.source_layers.steps import SourceOptimizer, feature_step_factors

__all__ = [
    "ActiveEmbedLayer",
    "ActiveSourceLayer",
    "LayerState",
    "PassiveEmbedLayer",
    "PassiveSourceLayer",
    "SourceOptimizer",
    "VocabularyError",
    "feature_step_factors",
    "keep_saved_tables",
    "keypair_from_state",
    "keypair_state",
]
