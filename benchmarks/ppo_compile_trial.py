"""Would compiling PPO's minibatch update pay on a CPU? Eager against ``torch.compile``, one process each.

PPO's update (forward, clipped loss, backward, gradient clipping, Adam) dominates its time
on classic control (``benchmarks/ppo_profile.py``). This trial times one minibatch step of
``rewardlab.agents.PPO``'s networks with the CartPole settings of ``benchmarks/ppo_speed.py``
(minibatches of 512) eagerly and with the forward and loss compiled by ``torch.compile``
(Inductor; AOTAutograd compiles the backward with it), each in a fresh process, twice: the
first compiled run fills Inductor's on-disk cache, the second reads it. It reports the
warm-up (the first compiled call) and the steady milliseconds per minibatch.

    python -m benchmarks.ppo_compile_trial

Writes ``benchmarks/results/ppo_compile_trial.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.machine import describe_machine, recorded_args

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("agents/ppo.py", "agents/fused.py", "rewardlab/common/compiled.py")

RESULTS = Path(__file__).parent / "results"


def trial(compiled: bool, minibatches: int) -> dict[str, float]:
    """One process's measurement (run in a child: ``--child``)."""
    import torch

    from rewardlab import envs
    from rewardlab.agents import PPO

    torch.set_num_threads(1)
    model = PPO(envs.make("CartPole-v1", num_envs=64, seed=0), seed=0, n_steps=32, n_epochs=10,
                learning_rate=1e-3, gamma=0.98, gae_lambda=0.8)
    policy, size = model.policy, 512
    generator = torch.Generator().manual_seed(0)
    obs = torch.randn(size, 4, generator=generator)
    actions = torch.randint(0, 2, (size,), generator=generator)
    old_log_prob, advantages = torch.randn(size, generator=generator), torch.randn(size, generator=generator)
    returns = torch.randn(size, 1, generator=generator)

    def loss_of(obs, actions, old_log_prob, advantages, returns):
        log_prob, entropy = policy.log_prob_and_entropy(obs, actions)
        ratio = (log_prob - old_log_prob).exp()
        normalised = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        pg_loss = -torch.min(normalised * ratio, normalised * ratio.clamp(0.8, 1.2)).mean()
        value_loss = (returns - policy.value(obs)).square().mean(dim=0).sum()
        return pg_loss + 0.5 * value_loss - 0.0 * entropy.mean()

    loss_fn = torch.compile(loss_of, dynamic=False) if compiled else loss_of

    def step() -> None:
        model.optimizer.zero_grad(set_to_none=True)
        loss_fn(obs, actions, old_log_prob, advantages, returns).backward()
        torch.nn.utils.clip_grad_norm_(model._parameters, 0.5, foreach=True)
        model.optimizer.step()

    start = time.perf_counter()
    step()
    warm_up = time.perf_counter() - start
    for _ in range(20):
        step()
    start = time.perf_counter()
    for _ in range(minibatches):
        step()
    return {"warm_up_s": warm_up, "ms_per_minibatch": (time.perf_counter() - start) / minibatches * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minibatches", type=int, default=300)
    parser.add_argument("--child", choices=("eager", "compiled"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(trial(args.child == "compiled", args.minibatches)))
        return
    cache = tempfile.mkdtemp(prefix="rewardlab-inductor-")  # an empty cache, then the filled one
    environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    rows = []
    for label, mode in (("eager", "eager"), ("compiled, empty cache", "compiled"),
                        ("compiled, cache filled", "compiled")):
        output = subprocess.run([sys.executable, "-m", "benchmarks.ppo_compile_trial", "--child", mode,
                                 "--minibatches", str(args.minibatches)], env=environment, check=True,
                                capture_output=True, text=True).stdout
        rows.append({"run": label, **json.loads(output.strip().splitlines()[-1])})
    machine = describe_machine()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ppo_compile_trial.json").write_text(
        json.dumps({"args": recorded_args(args), "machine": machine, "runs": rows}, indent=2) + "\n")
    eager = rows[0]["ms_per_minibatch"]
    lines = [
        "# PPO's minibatch update: eager vs torch.compile (CartPole settings, minibatch 512, one thread)",
        "",
        f"Machine: {machine['summary']}. Each row a fresh process; the compiled rows share one Inductor cache, "
        "empty before the first.",
        "",
        "| run | warm-up (first minibatch) s | ms per minibatch | speed vs eager |",
        "|---|---|---|---|",
        *(f"| {row['run']} | {row['warm_up_s']:.2f} | {row['ms_per_minibatch']:.2f} | "
          f"{eager / row['ms_per_minibatch']:.2f}x |" for row in rows),
        "",
        f"Reproduce: `python -m benchmarks.ppo_compile_trial --minibatches {args.minibatches}`.",
        "",
    ]
    (RESULTS / "ppo_compile_trial.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
