"""A PureJaxRL-style PPO in JAX on gymnax envs: the peer ``benchmarks/ppo_speed.py`` runs beside ours.

Written for this benchmark from PureJaxRL's published algorithm (``purejaxrl/ppo.py``,
Lu et al. 2022): separate actor and critic MLPs (two tanh layers of 64, orthogonal
initialisation with gains sqrt(2), 0.01 for the policy head and 1 for the value head),
a rollout of ``num_steps`` steps in ``num_envs`` gymnax envs with their automatic reset, GAE,
``update_epochs`` passes of ``num_minibatches`` shuffled minibatches with the clipped
surrogate, PureJaxRL's clipped value loss, per-minibatch advantage normalisation, and
``optax.chain(clip_by_global_norm, adam(eps=1e-5))`` with optional linear annealing. The
whole iteration (rollout, GAE, every epoch and minibatch) is one ``jax.jit``-compiled
function; between evaluations the iterations run inside one compiled ``lax.scan``, so
the host only sees the parameters when ``ppo_speed`` evaluates them.

Like PureJaxRL, an episode's end is a ``done`` without bootstrapping (terminated or
truncated alike); with ``clip_value=False`` the value loss is plain MSE, as ours is.

Configs (``CONFIGS``): ``purejaxrl`` is PureJaxRL's published CartPole-v1 config; ``ours``
is our per-env settings from ``benchmarks/ppo_speed.py`` exactly (the same-hyperparameter
comparison); ``tuned`` is the fastest point of ``--sweep``'s grid on the env.

Needs the ``bench`` extra (``pip install -e ".[bench]"``: jax, gymnax). Run by
``ppo_speed.py --jax`` in a child process, one per seed and config:

    python -m benchmarks.purejaxrl_ppo --env CartPole-v1 --config ours --seed 0 --threads 1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("benchmarks/purejaxrl_ppo.py",)

# PureJaxRL's CartPole-v1 config (purejaxrl/ppo.py); ent_coef 0.01, annealed 2.5e-4.
PUREJAXRL = dict(
    num_envs=4, num_steps=128, update_epochs=4, num_minibatches=4, lr=2.5e-4, anneal_lr=True,
    gamma=0.99, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
    clip_value=True, anneal_steps=500_000,
)  # fmt: skip

# PPO's defaults that ppo_speed.OURS does not set, in PureJaxRL's names.
_OUR_DEFAULTS = dict(
    anneal_lr=False, gamma=0.99, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.0, vf_coef=0.5,
    max_grad_norm=0.5, clip_value=False, num_minibatches=4,
)  # fmt: skip
_NAMES = {"num_envs": "num_envs", "n_steps": "num_steps", "n_epochs": "update_epochs",
          "learning_rate": "lr", "gamma": "gamma", "gae_lambda": "gae_lambda"}  # fmt: skip

# The fastest point of --sweep's grid per env (benchmarks/results/purejaxrl_sweep_<env>.md),
# merged into the same-as-ours config; the grid ran on our settings of then, whose GAE lambda
# on Acrobot-v1 (0.95) is kept here. Both points were our own settings then.
TUNED: dict[str, dict[str, Any]] = {
    "CartPole-v1": dict(num_envs=64, num_steps=32, update_epochs=4, lr=3e-3),
    "Acrobot-v1": dict(num_envs=64, num_steps=32, update_epochs=10, lr=3e-3, gae_lambda=0.95),
}

# --sweep's grid, each point merged into the same-as-ours config of the env.
SWEEP = [
    dict(num_envs=envs_, num_steps=steps, update_epochs=epochs, lr=lr)
    for envs_, steps in ((64, 32), (256, 16), (1024, 8))
    for epochs in (4, 10)
    for lr in (1e-3, 3e-3)
]


def same_as_ours(env_id: str) -> dict[str, Any]:
    """``benchmarks/ppo_speed.py``'s ``OURS[env_id]`` in this learner's names (minibatches: a
    quarter of the rollout, as ours)."""
    from benchmarks.ppo_speed import OURS

    settings = OURS[env_id]
    unknown = set(settings) - set(_NAMES)
    if unknown:
        raise ValueError(f"OURS[{env_id!r}] sets {sorted(unknown)}, which this learner does not take")
    return {**_OUR_DEFAULTS, **{_NAMES[k]: v for k, v in settings.items()}}


def config_for(name: str, env_id: str) -> dict[str, Any]:
    """The hyperparameters of config ``name`` on ``env_id``."""
    if name == "purejaxrl":
        return dict(PUREJAXRL)
    if name == "ours":
        return same_as_ours(env_id)
    if name == "tuned":
        return {**same_as_ours(env_id), **TUNED[env_id]}
    raise ValueError(f"unknown config {name!r}; one of purejaxrl, ours, tuned")


def limit_threads(threads: int) -> None:
    """Give XLA's CPU backend ``threads`` threads (set before jax is imported): one thread by
    its flags, more by the CPUs the process may run on."""
    if threads == 1:
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "")
            + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        )
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))[:threads]
        os.sched_setaffinity(0, cpus)


def make_learner(env_id: str, config: dict[str, Any], seed: int):  # noqa: ANN201 (jax types)
    """``(init_state, train_chunk(state, iterations), policy_params(state))``."""
    import gymnax
    import jax
    import jax.numpy as jnp
    import optax

    env, env_params = gymnax.make(env_id)
    num_actions = env.action_space(env_params).n
    obs_dim = int(math.prod(env.observation_space(env_params).shape))
    c = config
    batch = c["num_envs"] * c["num_steps"]
    minibatch = batch // c["num_minibatches"]
    updates_per_iteration = c["update_epochs"] * c["num_minibatches"]

    def dense(key, fan_in, fan_out, gain):
        return {"w": jax.nn.initializers.orthogonal(gain)(key, (fan_in, fan_out)), "b": jnp.zeros(fan_out)}

    def mlp_init(key, out, out_gain):
        k1, k2, k3 = jax.random.split(key, 3)
        return [dense(k1, obs_dim, 64, math.sqrt(2)), dense(k2, 64, 64, math.sqrt(2)), dense(k3, 64, out, out_gain)]

    def mlp(layers, x):
        for layer in layers[:-1]:
            x = jnp.tanh(x @ layer["w"] + layer["b"])
        return x @ layers[-1]["w"] + layers[-1]["b"]

    def actor_critic(params, obs):
        return mlp(params["actor"], obs), mlp(params["critic"], obs)[..., 0]

    def schedule(count):
        if not c["anneal_lr"]:
            return c["lr"]
        total_updates = c["anneal_steps"] // batch * updates_per_iteration
        return c["lr"] * jnp.maximum(1.0 - count / total_updates, 0.0)

    optimiser = optax.chain(optax.clip_by_global_norm(c["max_grad_norm"]), optax.adam(schedule, eps=1e-5))

    def loss_fn(params, obs, actions, old_log_prob, old_values, advantages, targets):
        logits, values = actor_critic(params, obs)
        log_probs = jax.nn.log_softmax(logits)
        log_prob = jnp.take_along_axis(log_probs, actions[:, None], axis=-1)[:, 0]
        entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
        if c["clip_value"]:
            clipped = old_values + (values - old_values).clip(-c["clip_eps"], c["clip_eps"])
            value_loss = 0.5 * jnp.maximum((values - targets) ** 2, (clipped - targets) ** 2).mean()
        else:
            value_loss = 0.5 * ((values - targets) ** 2).mean()
        ratio = jnp.exp(log_prob - old_log_prob)
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        clipped_ratio = ratio.clip(1.0 - c["clip_eps"], 1.0 + c["clip_eps"])
        policy_loss = -jnp.minimum(ratio * advantages, clipped_ratio * advantages).mean()
        # PureJaxRL weighs its value loss (0.5 * MSE) by vf_coef; ours is vf_coef * MSE:
        # the factor 2 makes them the same objective.
        return policy_loss + c["vf_coef"] * 2.0 * value_loss - c["ent_coef"] * entropy

    grad_fn = jax.grad(loss_fn)

    def env_step(carry, _):
        params, env_state, obs, key = carry
        key, act_key, step_key = jax.random.split(key, 3)
        logits, value = actor_critic(params, obs)
        action = jax.random.categorical(act_key, logits)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=-1)[:, 0]
        step_keys = jax.random.split(step_key, c["num_envs"])
        next_obs, env_state, reward, terminated, truncated, _ = jax.vmap(
            env.step, in_axes=(0, 0, 0, None)
        )(step_keys, env_state, action, env_params)
        done = terminated | truncated  # PureJaxRL's done: no bootstrap at either end
        transition = (obs, action, reward, done, value, log_prob)
        return (params, env_state, next_obs, key), transition

    def gae(values, rewards, dones, last_value):
        def backwards(carry, step):
            advantage, next_value = carry
            value, reward, done = step
            delta = reward + c["gamma"] * next_value * (1 - done) - value
            advantage = delta + c["gamma"] * c["gae_lambda"] * (1 - done) * advantage
            return (advantage, value), advantage

        _, advantages = jax.lax.scan(
            backwards, (jnp.zeros_like(last_value), last_value), (values, rewards, dones), reverse=True
        )
        return advantages, advantages + values

    def update_minibatch(train, data):
        params, opt_state = train
        grads = grad_fn(params, *data)
        updates, opt_state = optimiser.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), None

    def update_epoch(carry, _):
        params, opt_state, rollout, key = carry
        key, perm_key = jax.random.split(key)
        order = jax.random.permutation(perm_key, batch)
        shuffled = jax.tree_util.tree_map(
            lambda x: x[order].reshape((c["num_minibatches"], minibatch, *x.shape[1:])), rollout
        )
        (params, opt_state), _ = jax.lax.scan(update_minibatch, (params, opt_state), shuffled)
        return (params, opt_state, rollout, key), None

    def iteration(state, _):
        params, opt_state, env_state, obs, key = state
        (params, env_state, obs, key), (t_obs, t_act, t_rew, t_done, t_val, t_logp) = jax.lax.scan(
            env_step, (params, env_state, obs, key), None, c["num_steps"]
        )
        _, last_value = actor_critic(params, obs)
        advantages, targets = gae(t_val, t_rew, t_done.astype(jnp.float32), last_value)
        flat = lambda x: x.reshape((batch, *x.shape[2:]))  # noqa: E731
        rollout = tuple(flat(x) for x in (t_obs, t_act, t_logp, t_val, advantages, targets))
        (params, opt_state, _, key), _ = jax.lax.scan(
            update_epoch, (params, opt_state, rollout, key), None, c["update_epochs"]
        )
        return (params, opt_state, env_state, obs, key), None

    def init(seed: int):
        key = jax.random.PRNGKey(seed)
        key, actor_key, critic_key, reset_key = jax.random.split(key, 4)
        params = {"actor": mlp_init(actor_key, num_actions, 0.01), "critic": mlp_init(critic_key, 1, 1.0)}
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, c["num_envs"]), env_params
        )
        return (params, optimiser.init(params), env_state, obs, key)

    chunks: dict[int, Any] = {}

    def train_chunk(state, iterations: int):
        """``iterations`` compiled iterations (compiled once per count)."""
        if iterations not in chunks:
            chunks[iterations] = jax.jit(lambda s: jax.lax.scan(iteration, s, None, iterations)[0])
        state = chunks[iterations](state)
        jax.block_until_ready(state)
        return state

    def policy_params(state):
        """The actor's weights as numpy ``[(w, b), ...]``."""
        return [(jax.device_get(layer["w"]), jax.device_get(layer["b"])) for layer in state[0]["actor"]]

    return init(seed), train_chunk, policy_params, batch


def run(
    env_id: str, config_name: str, seed: int, cap: int, eval_freq: int, threshold: float | None,
    config: dict[str, Any] | None = None,
) -> dict:
    """Train until the deterministic policy reaches ``threshold`` (our evaluation) or ``cap`` steps.

    :param config: hyperparameters to use instead of ``config_for(config_name, env_id)``.
    """
    import numpy as np
    import torch

    from benchmarks.ppo_speed import EVAL_ENVS, SolveClock, _result
    from rewardlab import envs

    config = config if config is not None else config_for(config_name, env_id)
    state, train_chunk, policy_params, batch = make_learner(env_id, config, seed)
    iterations = max(1, round(eval_freq / batch))  # iterations between evaluations

    layers: list[tuple[torch.Tensor, torch.Tensor]] = []

    def act(obs: torch.Tensor) -> np.ndarray:
        x = obs.to(torch.float32)
        for i, (w, b) in enumerate(layers):
            x = x @ w + b
            if i < len(layers) - 1:
                x = torch.tanh(x)
        return x.argmax(dim=-1).numpy()

    eval_env = envs.make(env_id, num_envs=EVAL_ENVS, device="cpu", seed=10_000 + seed)
    start = time.perf_counter()
    state = train_chunk(state, iterations)  # compiles, then runs the first chunk
    first_chunk = time.perf_counter() - start
    start = time.perf_counter()
    state = train_chunk(state, iterations)
    compile_seconds = max(first_chunk - (time.perf_counter() - start), 0.0)
    # The two chunks trained; count them and restart the clock as if they ran at steady speed.
    steps = 2 * iterations * batch
    clock = SolveClock(act, eval_env, eval_freq, threshold)
    clock.train_seconds = 2 * (time.perf_counter() - start)
    clock.next_eval = steps  # evaluate the first two chunks now
    keep_going = True
    while keep_going:
        layers[:] = [(torch.tensor(np.array(w)), torch.tensor(np.array(b))) for w, b in policy_params(state)]
        keep_going = clock.after_update(steps)
        if not keep_going or steps >= cap:
            break
        state = train_chunk(state, iterations)
        steps += iterations * batch
    clock.finish(steps)
    result = _result(f"jax-{config_name}", env_id, seed, steps, clock)
    result |= {"warm_up_seconds": compile_seconds, "config": config}
    return result


def sweep(env_id: str, threads: int, cap: int, eval_freq: int) -> int:
    """Time to solve ``env_id`` at each point of ``SWEEP``, 2 seeds; writes the table."""
    import statistics
    from pathlib import Path

    from benchmarks.machine import describe_machine
    from benchmarks.ppo_speed import THRESHOLDS

    rows = []
    for point in SWEEP:
        config = {**same_as_ours(env_id), **point}
        runs = [run(env_id, "sweep", seed, cap, eval_freq, THRESHOLDS[env_id], config) for seed in (0, 1)]
        times = [r["seconds_to_solve"] if r["solved"] else math.inf for r in runs]
        rows.append({"point": point, "median_seconds_to_solve": statistics.median(times),
                     "solved": sum(r["solved"] for r in runs),
                     "steps_per_second": statistics.median(r["train_steps_per_second"] for r in runs),
                     "warm_up_seconds": statistics.median(r["warm_up_seconds"] for r in runs)})
        print(rows[-1], file=sys.stderr, flush=True)
    machine = describe_machine()
    lines = [
        f"# The JAX learner's configs on {env_id}: time to solve ({THRESHOLDS[env_id]:g}), seeds 0 and 1",
        "",
        f"Machine: {machine['summary']}; {threads} thread(s). Each point merged into our {env_id} "
        "settings (`same_as_ours`); evaluation as in `benchmarks/ppo_speed.py`.",
        "",
        "| num_envs | num_steps | update_epochs | lr | solved | median s to solve | steps/s | compile s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda r: r["median_seconds_to_solve"]):
        p = row["point"]
        lines.append(
            f"| {p['num_envs']} | {p['num_steps']} | {p['update_epochs']} | {p['lr']:g} | {row['solved']}/2 "
            f"| {row['median_seconds_to_solve']:.2f} | {row['steps_per_second']:,.0f} | {row['warm_up_seconds']:.1f} |"
        )
    lines += ["", f"Reproduce: `python -m benchmarks.purejaxrl_ppo --sweep --env {env_id} --threads {threads}`.", ""]
    out = Path(__file__).parent / "results" / f"purejaxrl_sweep_{env_id.split('-')[0].lower()}"
    out.with_suffix(".md").write_text("\n".join(lines))
    out.with_suffix(".json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=2) + "\n")
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--config", default="ours", choices=("purejaxrl", "ours", "tuned"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cap", type=int, default=500_000)
    parser.add_argument("--eval-freq", type=int, default=4096)
    parser.add_argument("--threshold", type=float, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--jax-cache", default=None,
                        help="folder of JAX's persistent compilation cache (default: none, as PureJaxRL)")
    parser.add_argument("--sweep", action="store_true",
                        help="run SWEEP on --env (seeds 0, 1) and write results/purejaxrl_sweep_<env>.*")
    args = parser.parse_args(argv)
    limit_threads(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    if args.jax_cache:
        import jax

        jax.config.update("jax_compilation_cache_dir", args.jax_cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    if args.sweep:
        return sweep(args.env, args.threads, args.cap, args.eval_freq)
    result = run(args.env, args.config, args.seed, args.cap, args.eval_freq, args.threshold)
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
