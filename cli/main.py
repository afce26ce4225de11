"""`vfl`, the command line: the only place that parses arguments, sets up logging and
installs signal handlers.

Exit codes: 0 success; 1 the job failed or was cancelled (or `vfl health`: not serving);
2 bad input (spec, config, certificate, unknown job or model, or a job that failed because
a party refused its input at PREPARE: its data, a model it does not fit); 3 a daemon is unreachable,
the TLS handshake failed, the coordinator went away while a job was followed, or `vfl
models delete` could not reach a party (it still holds its part); 130
interrupted (Ctrl-C stops `vfl watch` and `vfl submit --wait` watching, never the job;
`vfl run` cancels its job and stops its processes).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import grpc

# Everything else is imported inside the functions: the worker processes a daemon starts
# ("spawn": PSI, ciphertext products, obfuscator helpers) import this module again as
# their __main__ without calling main(), and should not pay for grpc and every command.


def build_parser() -> argparse.ArgumentParser:
    from vfl.cli import (
        analyze,
        attack,
        certs,
        daemons,
        data,
        demo,
        doctor,
        jobs,
        models,
        predict,
        report,
        run,
        score,
        spec,
    )

    p = argparse.ArgumentParser(prog="vfl", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    groups = (
        daemons,
        jobs,
        doctor,
        report,
        predict,
        score,
        models,
        certs,
        run,
        analyze,
        attack,
        demo,
        data,
        spec,
    )
    for group in groups:
        group.add_parser(sub)
    return p


def _explain(args: argparse.Namespace, exc: grpc.RpcError) -> str:
    import grpc
    from vfl.rpc import COORDINATOR_ID, explain

    if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
        return exc.details() or exc.code().name
    address = str(getattr(args, "coordinator", None) or getattr(args, "address", ""))
    expect = COORDINATOR_ID if getattr(args, "coordinator", None) else getattr(args, "expect", None)
    return explain(exc, address, bool(getattr(args, "tls", None)), expect)


def main(argv: list[str] | None = None) -> int:
    import grpc
    from vfl.contract.errors import ContractError
    from vfl.errors import (
        CoordinatorError,
        CoordinatorLost,
        CoordinatorUnavailable,
        PartyUnavailable,
    )
    from vfl.party.errors import PartyError
    from vfl.secure.errors import SecureError

    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (CoordinatorLost, CoordinatorUnavailable, PartyUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)  # raised here: a daemon did not answer
        return 3
    except (ContractError, CoordinatorError, PartyError, SecureError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except grpc.RpcError as exc:
        print(f"error: {_explain(args, exc)}", file=sys.stderr)
        code = exc.code()
        return 3 if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) else 2
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
