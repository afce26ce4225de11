"""vfl: vertical federated learning whose parties never see each other's rows, weights
or labels.

Installed, every part of the platform lives under this one namespace:

    vfl.proto        the wire contract (protobuf) and the gRPC plumbing both daemons use
    vfl.contract     what both daemons share: the job spec, job states, job logs, errors
    vfl.party        the party daemon (data, training roles, stored models, scoring)
    vfl.coordinator  the coordinator daemon (job store, life cycle, dashboard)
    vfl.secure       BlindFL source layers, Paillier, PSI, PKI (never imports grpc)
    vfl.celu         CELU-VFL local updates (never imports grpc)
    vfl.cli          the `vfl` command
"""
