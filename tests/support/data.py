"""Where the test data sets are, and the breast tables as a party's datasets."""

from __future__ import annotations

from pathlib import Path

from vfl.contract.spec import TableSource

REPO = Path(__file__).resolve().parents[2]
FATE = REPO / "cli" / "data"
DATA = REPO / "tests" / "data"


def shared_data(*parts: str) -> Path:
    """A data file copied into tests/data (see its README for sources and licences)."""
    path = DATA.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: restore tests/data from git")
    return path


def breast() -> dict[str, dict[str, TableSource]]:
    return {
        "bank": {"d": TableSource(path=str(FATE / "breast_hetero_guest.csv"), label="y")},
        "shop": {"d": TableSource(path=str(FATE / "breast_hetero_host.csv"))},
    }


def breast_datasets_config() -> dict[str, dict[str, dict]]:
    """The breast tables as each party's config exposes them (dataset "breast")."""
    return {
        "bank": {"breast": {"path": str(FATE / "breast_hetero_guest.csv"), "label": "y"}},
        "shop": {"breast": {"path": str(FATE / "breast_hetero_host.csv")}},
    }


def motor() -> dict[str, dict[str, TableSource]]:
    """FATE's motor data split three ways: plant (label motor_speed), s1 and s2."""
    fate = "fate"
    return {
        "plant": {
            "d": TableSource(
                path=str(shared_data(fate, "motor_hetero_guest.csv")), id="idx", label="motor_speed"
            )
        },
        "s1": {"d": TableSource(path=str(shared_data(fate, "motor_hetero_host_1.csv")), id="idx")},
        "s2": {"d": TableSource(path=str(shared_data(fate, "motor_hetero_host_2.csv")), id="idx")},
    }
