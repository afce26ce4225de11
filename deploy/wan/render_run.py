"""Write the party configs and job spec for netns.sh: party 0 active, party 1 passive.

python render_run.py JOB.yaml WORKDIR ACTIVE_IP PASSIVE_IP
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from vfl.contract.spec import DataSpec, load_spec
from vfl.local.run import spec_to_yaml


def main() -> None:
    job, work, active_ip, passive_ip = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    spec = load_spec(job)
    if len(spec.parties) != 2:
        raise SystemExit("netns.sh runs two-party jobs")
    ips = {spec.active.id: active_ip, spec.passives[0].id: passive_ip}
    peers = {pid: f"{ip}:7701" for pid, ip in ips.items()}
    for p in spec.parties:
        dataset = p.data.table().model_dump(mode="json", exclude_none=True)
        config = {
            "party": p.id,
            "listen": f"{ips[p.id]}:7701",
            "coordinator": f"{active_ip}:7700",
            "peers": peers,
            "datasets": {"data": dataset},
        }
        name = "active" if p.role == "active" else "passive"
        (work / f"{name}.yaml").write_text(yaml.safe_dump(config))
        spec = spec.with_data(p.id, DataSpec(dataset="data"))
    (work / "job.yaml").write_text(spec_to_yaml(spec))


if __name__ == "__main__":
    main()
