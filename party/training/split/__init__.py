"""`protocol: split`: plaintext split learning, the insecure baseline.

ActiveTrainer    the active party: its bottom model, the top model, loss, derivatives
PassiveTrainer   a passive party: its bottom model, activations out, derivatives in
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
