"""The party's training roles: the active party (top model, loss, metrics) and passive
parties (bottom models), written against `secure.channel.Channel` only."""
