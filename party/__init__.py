"""The party daemon: data registry, gRPC transport, and the party's training roles."""
