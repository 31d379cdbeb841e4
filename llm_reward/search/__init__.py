"""The reward-code search: Eureka and Text2Reward loops, an LLM-free evolve proposer, resume, Ray.

    from rewardlab.llm_reward.search import SearchConfig, search

    config = SearchConfig(env_id="CartPole-v1", task="balance the pole for 500 steps",
                          proposer="evolve", iterations=3, samples=4, steps=20_000)
    result = search(config, "runs/search_cartpole", workers=2)
    print(result.best.key, result.best.fitness, result.normalized_score)

With an LLM: ``client=llm_reward.clients.make_client("openai:gpt-4o")`` and
``proposer="llm", llm="openai:gpt-4o"``. The CLI is ``rewardlab search``
(:mod:`rewardlab.app.search`); the run directory's layout is in
:mod:`rewardlab.llm_reward.search.store`.
"""

from rewardlab.llm_reward.search.executors import EvalTask, Executor, LocalExecutor, RayExecutor
from rewardlab.llm_reward.search.feedback import FeedbackSource, FileFeedback, TerminalFeedback
from rewardlab.llm_reward.search.loop import SearchConfig, SearchResult, best_candidate, search
from rewardlab.llm_reward.search.records import Candidate, FinalScore, PrescreenScore
from rewardlab.llm_reward.search.reflection import RewardSignals, reward_signals

__all__ = [
    "Candidate",
    "EvalTask",
    "Executor",
    "FeedbackSource",
    "FileFeedback",
    "FinalScore",
    "LocalExecutor",
    "PrescreenScore",
    "RayExecutor",
    "RewardSignals",
    "SearchConfig",
    "SearchResult",
    "TerminalFeedback",
    "best_candidate",
    "reward_signals",
    "search",
]
