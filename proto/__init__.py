"""The wire contract: protobuf messages and services, generated from the `.proto` files
beside them (scripts/gen_protos.sh), and the gRPC plumbing both daemons use.

    common_pb2                the envelope and messages both services share
    coordinator_pb2, coordinator_pb2_grpc   `vfl.v1.CoordinatorService`: jobs, models,
                              progress reports, registration
    party_pb2, party_pb2_grpc `vfl.v1.PartyService`: job control, the data plane,
                              model parts, online scoring
    rpc                       dialling, serving, TLS identities, status and error messages
    serde                     plain Python values of messages (JSON output, the job store)

Import the generated modules by name (`from vfl.proto import party_pb2`); this package
itself imports nothing, so loading one module loads neither grpc nor the others.
"""
