"""Check the demo job's result (`vfl submit --wait --json` output): it SUCCEEDED with r2 >= 0.8.

python3 deploy/check_result.py RESULT.json     (deploy/run_local.sh, deploy/e2e_docker.sh)
"""

import json
import sys

result = json.load(open(sys.argv[1]))
r2 = result.get("metrics", {}).get("r2", 0.0)
if result.get("state") != "SUCCEEDED" or r2 < 0.8:
    sys.exit(f"unexpected result: state {result.get('state')}, r2 {r2}: {result.get('reason')}")
print(
    f"job {result['job']}: {result['state']}, r2 {r2:.3f}, {result['rounds']} rounds, "
    f"intersection {result.get('intersection_size')}, {result.get('seconds')} s"
)
