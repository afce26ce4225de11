"""Plaintext models of what `split` and `blindfl` train on the credit-shaped or the sparse
data, over many initialisations: how much of a blindfl - split difference is the model, how much the
optimiser, how much the luck of the initial weights (bench/accuracy.py measures the real
jobs; this runs the same models without encryption, in seconds per run).

    python -m bench.plateau                              data seeds 0-3, 4 inits each
    python -m bench.plateau --seeds 2 --inits 8 --epochs 3
    python -m bench.plateau --data sparse --rows 20000   bench/sparse_data.py's tables

Models (default spec: out_dim 16, top [32], batch 256, Adagrad lr 0.05, the jobs' plan of
validation rows and batches for train.seed = the init):

    split            each party's linear bottom (16 wide), side by side into the top
    blindfl          what the secure layers compute (docs/protocols.md §4, §5): B's own
                     bottom (32 wide: `side_width`) beside Z = X_A W_A + X_B W_B + b;
                     W_A = U_A + V_A with the factored step c_j d_k of
                     `secure.source_layers.steps` (SourceOptimizer), W_B and b with
                     Adagrad, the initial shares' distributions
    blindfl-narrow   the same with B's own bottom 16 wide (the composition until 2026-11)
    blindfl-adagrad  blindfl with Adagrad element by element on W_A: what a (nonlinear)
                     per-element secure step could at best give

The secure layers compute `blindfl` exactly up to fixed point (tests/secure/source_layers/
test_matmul_layer.py), so its AUC distribution is the real job's, without the crypto.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

import numpy as np
import torch
from torch import nn
from vfl.party.training.blindfl.active import side_width
from vfl.party.training.metrics import auc
from vfl.party.training.nets import seeded_mlp
from vfl.party.training.plan import make_plan
from vfl.secure.config import DENSE_FEATURE_BITS
from vfl.secure.source_layers.sharing import sample_share
from vfl.secure.source_layers.steps import SourceOptimizer, feature_step_factors, scaled_columns

from bench.credit_data import credit_arrays
from bench.sparse_data import sparse_arrays

H, TOP, BATCH, LR, FRACTION = 16, (32,), 256, 0.05, 0.2
MODELS = ("split", "blindfl", "blindfl-narrow", "blindfl-adagrad")
DATA = {"credit": credit_arrays, "sparse": sparse_arrays}


class Run:
    """One model on one data seed from one initialisation (`init` = the job's train.seed)."""

    def __init__(self, model: str, data: tuple, init: int, epochs: int) -> None:
        xa, xb, y = data  # bank (active, labels), shop (passive)
        self.model, self.y = model, y
        bank_features, shop_features = xa.shape[1], xb.shape[1]
        self.xa, self.xb = (
            torch.tensor(xa, dtype=torch.float32),
            torch.tensor(xb, dtype=torch.float32),
        )
        self.plan = make_plan(len(y), FRACTION, BATCH, epochs, init, 10**9)
        self.target = torch.tensor(y, dtype=torch.float32)
        salt, width = ("bank", H) if model == "split" else ("bank/side", side_width(H, 2))
        width = H if model == "blindfl-narrow" else width
        self.bank = seeded_mlp(init, salt, bank_features, (), width)  # the jobs' salts
        self.top = seeded_mlp(init, "top", H + width, TOP, 1)
        params = [*self.bank.parameters(), *self.top.parameters()]
        if model == "split":
            self.shop = seeded_mlp(init, "shop", shop_features, (), H)
            params += list(self.shop.parameters())
        else:
            rng = np.random.default_rng([init, 7])
            bank_share, shop_share = (
                partial(sample_share, rng, d, H) for d in (bank_features, shop_features)
            )
            self.w_b = bank_share() + bank_share()  # V_B + U_B
            self.bias = np.zeros(H)
            self.u_a, self.v_a = shop_share(), shop_share()
            self.factors = feature_step_factors(xb[self.plan.train_rows])
            self.feature_bits = (
                0 if np.all(xb == np.round(xb)) else DENSE_FEATURE_BITS
            )  # as the job's
            self.rule = SourceOptimizer("adagrad")
        self.opt = torch.optim.Adagrad(params, lr=LR)

    def _out(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor | None]:
        xa, xb = self.xa[rows], self.xb[rows]
        if self.model == "split":
            return self.top(torch.cat([self.bank(xa), self.shop(xb)], 1)), None
        w_a = torch.tensor(self.u_a + self.v_a, dtype=torch.float32)
        w_b = torch.tensor(self.w_b, dtype=torch.float32)
        z = (xa @ w_b + xb @ w_a + torch.tensor(self.bias, dtype=torch.float32)).requires_grad_()
        return self.top(torch.cat([z, self.bank(xa)], 1)), z

    def step(self, rows: np.ndarray) -> None:
        out, z = self._out(rows)
        loss = nn.functional.binary_cross_entropy_with_logits(out[:, 0], self.target[rows])
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        if z is None or z.grad is None:
            return
        g = z.grad.double().numpy()
        xa, xb = self.xa[rows].double().numpy(), self.xb[rows].double().numpy()
        if self.model != "blindfl-adagrad":
            scaled = scaled_columns(xb, self.factors, self.feature_bits)
            self.v_a -= scaled.T @ self.rule.passive_step(g, LR)
        else:  # Adagrad on each element of W_A (U_A is fixed)
            self.v_a = self.rule.own_step("v_a", self.v_a, xb.T @ g, LR)
        self.w_b = self.rule.own_step("v_b", self.w_b, xa.T @ g, LR)
        self.bias = self.rule.own_step("bias", self.bias, g.sum(0), LR)

    def validate(self) -> float:
        rows = self.plan.val_rows
        with torch.no_grad():
            out, _ = self._out(rows)
        return auc(self.y[rows], out[:, 0].numpy())

    def train(self) -> list[float]:
        """The validation AUC after each epoch."""
        aucs, last = [], 0
        for _, epoch, rows in self.plan.batches():
            if epoch != last:
                aucs.append(self.validate())
                last = epoch
            self.step(rows)
        return [*aucs, self.validate()]


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.plateau", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3], help="data seeds")
    parser.add_argument("--inits", type=int, default=4, help="initialisations per data seed")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--data", choices=list(DATA), default="credit")
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"validation AUC after epoch 1 and {args.epochs}, mean (min..max) over inits 100..")
    print(f"{'seed':>4}  " + "  ".join(f"{m:>28}" for m in args.models))
    totals: dict[str, list[np.ndarray]] = {m: [] for m in args.models}
    for seed in args.seeds:
        data = DATA[args.data](args.rows, seed)
        cells = []
        for model in args.models:
            runs = np.array(
                [Run(model, data, 100 + i, args.epochs).train() for i in range(args.inits)]
            )
            totals[model].append(runs)
            first, last = runs[:, 0], runs[:, -1]
            cells.append(
                f"{first.mean():.4f} {last.mean():.4f} ({last.min():.3f}..{last.max():.3f})"
            )
        print(f"{seed:>4}  " + "  ".join(f"{c:>28}" for c in cells), flush=True)
    means = [np.concatenate(totals[m]) for m in args.models]
    print(
        f"{'all':>4}  "
        + "  ".join(f"{r[:, 0].mean():.4f} {r[:, -1].mean():.4f}{'':>15}" for r in means)
    )
    if "split" in args.models and len(means[0]) > 1:
        split = means[args.models.index("split")]
        print(
            f"minus split, paired over {len(split)} runs: mean +- standard error @1, @{args.epochs}"
        )
        for model, runs in zip(args.models, means, strict=True):
            if model != "split":
                diff = runs[:, [0, -1]] - split[:, [0, -1]]
                error = diff.std(axis=0, ddof=1) / np.sqrt(len(diff))
                cells = "  ".join(
                    f"{m:+.4f} +- {e:.4f}" for m, e in zip(diff.mean(0), error, strict=True)
                )
                print(f"  {model:<16} {cells}")


if __name__ == "__main__":
    sys.exit(main())
