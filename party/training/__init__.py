"""The party's training roles: the active party (top model, loss, metrics) and passive
parties (bottom models), written against `secure.channel.Channel` only. Which role a
party runs is its model kind's choice (`party.kinds`).

    RoleContext             what a role needs: spec, channel, inputs, plan (`context`)
    Plan, make_plan         the schedule every party derives from the spec (`plan`)
    Task, make_task         the active party's label encoding, loss, metrics (`task`)

`split/` holds the plaintext split-learning roles, `blindfl/` the BlindFL ones; `nets`
their torch networks, `inputs` a party's aligned inputs (any kind's).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
