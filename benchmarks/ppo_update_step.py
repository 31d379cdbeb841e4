"""PPO's minibatch step: Adam in the compiled graph against ``torch.optim`` after a compiled gradient.

Why ``agents/fused.py`` writes Adam and the gradient-norm clip into the step it compiles. On
CartPole-v1 with ``benchmarks/ppo_speed.py``'s ``OURS`` settings (64 envs x 32 steps, 4
epochs of minibatches of 512 rows), one torch thread, four steps of the same loss timed
side by side, each on its own model:

- ``ours compiled``: the model's step (:class:`rewardlab.agents.fused.CompiledUpdate`) as PPO
  with ``compile=True`` runs it: gradient, clip and Adam in one compiled graph;
- ``compiled grad + torch.optim``: the loss's gradient compiled alone (the same loss and
  decompositions, :func:`rewardlab.common.compiled.load_or_compile`), then
  ``clip_grad_norm_`` and ``torch.optim.Adam(fused=True)``;
- ``ours eager``: PPO's step without ``compile`` (``PPO._minibatch_step``);
- ``eager autograd + torch.optim``: ``loss.backward()``, ``clip_grad_norm_``,
  ``torch.optim.Adam(fused=True)``.

Each repetition runs the 16 minibatch steps of one update for each variant in turn; the
median over the repetitions after the first five is reported per minibatch step. Writes
``benchmarks/results/ppo_update_step.{json,md}``::

    python -m benchmarks.ppo_update_step
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from benchmarks.machine import describe_machine, recorded_args
from benchmarks.ppo_speed import OURS
from rewardlab import envs
from rewardlab.agents.fused import _DECOMPOSITIONS
from rewardlab.agents.ppo import PPO
from rewardlab.common.compiled import load_or_compile

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = (
    "agents/fused.py",
    "agents/ppo.py",
    "agents/networks.py",
    "rewardlab/common/networks.py",
    "rewardlab/common/compiled.py",
)

RESULTS = Path(__file__).parent / "results"
ENV_ID = "CartPole-v1"
WARMUP = 5  # repetitions left out of the medians


def make_model(compile: bool) -> PPO:
    settings = dict(OURS[ENV_ID])
    num_envs = settings.pop("num_envs")
    return PPO(envs.make(ENV_ID, num_envs=num_envs, seed=0), seed=0, compile=compile, **settings)


def minibatch_rows(model: PPO) -> tuple[tuple[torch.Tensor, ...], int, int]:
    """A rollout's rows as PPO's update takes them (observations and actions of one real
    rollout, the policy's own log-probabilities and values), its size and batch size."""
    model.learn(model.n_steps * model.env.num_envs)
    rollout = model._rollout
    obs = rollout.obs.reshape(-1, *rollout.obs.shape[2:])
    actions = rollout.actions.reshape(-1)
    with torch.no_grad():
        log_prob, _, values = model.policy(obs, actions)
    advantages = torch.randn(obs.shape[0], generator=torch.Generator().manual_seed(0))
    returns = values + torch.randn(values.shape, generator=torch.Generator().manual_seed(1))
    size = obs.shape[0]
    return (
        (obs, actions, log_prob, advantages, returns, values),
        size,
        model.config.batch_size or size // 4,
    )


def ours(
    model: PPO, rows: tuple[torch.Tensor, ...], batch_size: int
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The model's own minibatch step, compiled or eager as the model was made."""
    learning_rate = model.config.learning_rate

    def run(idx: torch.Tensor) -> torch.Tensor:
        losses, _ = model._minibatch_step((*rows, idx), learning_rate)
        return torch.stack(losses)

    return run


def compiled_grad_torch_optim(
    model: PPO, rows: tuple[torch.Tensor, ...], batch_size: int
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The loss's gradient compiled alone, then clip_grad_norm_ and torch.optim.Adam(fused=True),
    the parameters and gradients views of flat buffers that the compiled call reads and fills."""
    from torch.fx.experimental.proxy_tensor import make_fx

    names = [name for name, _ in model.policy.named_parameters()]
    params = [p for _, p in model.policy.named_parameters()]
    shapes, sizes = [p.shape for p in params], [p.numel() for p in params]
    with torch.no_grad():
        flat = torch.cat([p.detach().reshape(-1) for p in params])
        grads = torch.zeros_like(flat)
        for p, value, grad in zip(params, flat.split(sizes), grads.split(sizes), strict=True):
            p.data = value.view(p.shape)
            p.grad = grad.view(p.shape)

    def gradient(
        flat_params: torch.Tensor, *batch: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.enable_grad():
            leaf = flat_params.detach().requires_grad_()
            values = [v.view(s) for v, s in zip(leaf.split(sizes), shapes, strict=True)]
            losses = model._loss(batch, dict(zip(names, values, strict=True)))
            (grad,) = torch.autograd.grad(losses.loss, leaf)
        return grad, torch.stack(losses).detach()

    inputs = [flat, *rows, torch.arange(batch_size)]
    compiled = load_or_compile(make_fx(gradient, decomposition_table=_DECOMPOSITIONS)(*inputs), inputs,
                               "bench-ppo-gradient")  # fmt: skip
    optimizer = torch.optim.Adam(params, lr=model.config.learning_rate, eps=1e-5, fused=True)
    max_norm = model.config.max_grad_norm

    def run(idx: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            grad, parts = compiled(flat, *rows, idx)
            grads.copy_(grad)
        nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
        optimizer.step()
        return parts

    return run


def eager_torch_optim(
    model: PPO, rows: tuple[torch.Tensor, ...]
) -> Callable[[torch.Tensor], torch.Tensor]:
    """Autograd, clip_grad_norm_ and torch.optim.Adam(fused=True), eagerly."""
    params = list(model.policy.parameters())
    optimizer = torch.optim.Adam(params, lr=model.config.learning_rate, eps=1e-5, fused=True)
    max_norm = model.config.max_grad_norm

    def run(idx: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        losses = model._loss((*rows, idx))
        losses.loss.backward()
        nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
        optimizer.step()
        return torch.stack(losses).detach()

    return run


VARIANTS = {
    "ours compiled": "gradient, clip and Adam in one compiled graph (PPO with `compile=True`)",
    "compiled grad + torch.optim": "the loss's gradient compiled, then `clip_grad_norm_` and "
    "`torch.optim.Adam(fused=True)`",
    "ours eager": "PPO's eager step (without `compile`): autograd, `clip_grad_norm_`, its `torch.optim.Adam`",
    "eager autograd + torch.optim": "eager: autograd, `clip_grad_norm_`, `torch.optim.Adam(fused=True)`",
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--reps", type=int, default=1000, help="repetitions of one update's 16 steps a variant"
    )
    parser.add_argument("--out", default=str(RESULTS / "ppo_update_step"))
    args = parser.parse_args()
    if args.reps <= WARMUP:
        parser.error(
            f"--reps {args.reps}: give more than {WARMUP} (the first {WARMUP} are left out)"
        )
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    start = time.perf_counter()
    models = {"ours compiled": make_model(True)}
    rows, size, batch_size = minibatch_rows(models["ours compiled"])
    models.update({name: make_model(False) for name in VARIANTS if name != "ours compiled"})
    for name, model in models.items():  # the same starting parameters for all
        if name != "ours compiled":
            model.policy.load_state_dict(models["ours compiled"].policy.state_dict())
    steps = {
        "ours compiled": ours(models["ours compiled"], rows, batch_size),
        "compiled grad + torch.optim": compiled_grad_torch_optim(
            models["compiled grad + torch.optim"], rows, batch_size
        ),  # fmt: skip
        "ours eager": ours(models["ours eager"], rows, batch_size),
        "eager autograd + torch.optim": eager_torch_optim(
            models["eager autograd + torch.optim"], rows
        ),
    }
    n_epochs = models["ours compiled"].config.n_epochs
    generator = torch.Generator().manual_seed(0)
    minibatches = [
        permutation[i : i + batch_size]
        for permutation in (torch.randperm(size, generator=generator) for _ in range(n_epochs))
        for i in range(0, size, batch_size)
    ]
    setup_s = time.perf_counter() - start
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.reps):
        for name, step in steps.items():
            begin = time.perf_counter()
            for idx in minibatches:
                step(idx)
            times[name].append((time.perf_counter() - begin) / len(minibatches))
    load_after = os.getloadavg()
    base = statistics.median(times["ours compiled"][WARMUP:])
    rows_out = []
    for name, seconds in times.items():
        us = statistics.median(seconds[WARMUP:]) * 1e6
        rows_out.append({"variant": name, "description": VARIANTS[name], "us_per_minibatch_step": round(us, 1),
                         "over_ours_compiled": round(us / (base * 1e6), 2)})  # fmt: skip
        print(json.dumps(rows_out[-1]))
    machine = describe_machine()
    machine["load_average_before"] = [round(x, 2) for x in load_before]
    machine["load_average_after"] = [round(x, 2) for x in load_after]
    by_name = {row["variant"]: row for row in rows_out}
    lines = [
        "# PPO's minibatch step: Adam in the compiled graph against torch.optim after a compiled gradient",
        "",
        "Why `agents/fused.py` writes Adam and the gradient-norm clip into the step it compiles,",
        "rather than compiling the loss and its gradient and stepping `torch.optim.Adam` after.",
        "",
        f"Machine: {machine['summary']}, one torch thread; commit {machine['commit']}, {machine['date']}.",
        f"The machine was shared: load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
        "(compare within this run only).",
        f"Setting: {ENV_ID} with `benchmarks/ppo_speed.py`'s `OURS` settings (64 envs x 32 steps,",
        f"minibatches of {batch_size} rows, 64 x 64 tanh networks), each variant on its own model;",
        f"one update's {len(minibatches)} minibatch steps a repetition, {args.reps} repetitions interleaved",
        f"(the variants in turn), the median over the last {args.reps - WARMUP} per minibatch step.",
        f"Made by `python -m benchmarks.ppo_update_step --reps {args.reps}` ({setup_s:.0f} s of setup",
        "and compiling or loading compiled libraries).",
        "",
        "| variant | us per minibatch step | / ours compiled |",
        "|---|---|---|",
    ]
    for row in rows_out:
        lines.append(
            f"| {row['description']} | {row['us_per_minibatch_step']:.0f} | {row['over_ours_compiled']:.2f} |"
        )
    optim = by_name["compiled grad + torch.optim"]["over_ours_compiled"]
    eager = by_name["ours eager"]["us_per_minibatch_step"] / by_name["eager autograd + torch.optim"][
        "us_per_minibatch_step"]  # fmt: skip
    lines += [
        "",
        f"So `torch.optim` after a compiled gradient takes {optim:.2f}x the time of the step with Adam",
        "in the graph: the optimiser's step and the clip cost their own dispatches after the",
        f"compiled call. Eagerly, PPO's step takes {eager:.2f}x the time of the same calls written",
        "inline (the two should match: PPO's eager step is `loss.backward()`, `clip_grad_norm_`",
        "and `torch.optim.Adam(fused=True)`).",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {"machine": machine, "args": recorded_args(args), "env_id": ENV_ID, "batch_size": batch_size,
              "minibatch_steps_per_rep": len(minibatches), "warmup_reps": WARMUP, "setup_s": round(setup_s, 1),
              "rows": rows_out}  # fmt: skip
    out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
