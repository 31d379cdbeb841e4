"""The prompts of the search: Eureka's and Text2Reward's first prompt and the feedback rounds.

A conversation is always ``[system, task prompt]`` and, from the second iteration on,
``[assistant: the best program so far, user: feedback]``: the best program stays in the
conversation and only the latest feedback is added (as Eureka does), so prompts do not
grow with the number of iterations.

- Eureka: the feedback is the reward reflection of the best program so far, a line for
  every candidate of the last iteration (fitness, reward-hacking signals, prescreen
  findings), and each failed program's reason and cut traceback.
- Both: an answer cut off by the token limit gets a note asking for a shorter one, and an
  answer with several programs a note naming the one trained.
- Text2Reward: the first prompt may carry the most similar examples of the library
  (few-shot); the feedback is the human's text (terminal or file) with the same results.
"""

from __future__ import annotations

from collections.abc import Sequence

from rewardlab.envs.descriptions import EnvDescription
from rewardlab.llm_reward.programs.program import code_choice_note
from rewardlab.llm_reward.programs.text import prompt_block, prompt_line
from rewardlab.llm_reward.search.examples import Example
from rewardlab.llm_reward.search.records import PRESCREEN_FAILURE, Candidate
from rewardlab.llm_reward.search.reflection import describe_failure, program_output, reflect, tips
from rewardlab.llm_reward.training.stopping import STOPPED

__all__ = [
    "CUT_OFF_NOTE",
    "SYSTEM_PROMPT",
    "answer_notes",
    "candidate_line",
    "conversation",
    "failure_details",
    "feedback_prompt",
    "task_prompt",
]

Message = dict[str, str]

# A search's note in a candidate's one-line summary is cut to this length.
LINE_CHARS = 300

SYSTEM_PROMPT = (
    "You are a reward engineer trying to write reward functions to solve reinforcement learning "
    "tasks as effectively as possible. Your goal is to write a reward function for the environment "
    "that will help the agent learn the task described in text. Your reward function should use "
    "useful variables from the environment as inputs."
)

_FORMAT = (
    "Write the reward function as one ```python block defining `compute_reward`. Its arguments "
    "are any of the variables above, by name (each a torch tensor with one row per env); it returns "
    "`(reward, components)`: the total reward, a float tensor of shape (N,), and a dict of named "
    "float (N,) tensors, one per reward component. Only math, numpy and torch may be imported "
    "(`math`, `np` and `torch` are available without importing); the program may not read or write "
    "files, use the network, start processes or define classes.\n"
    "Some tips for reward design: (1) normalize the reward or its components to a fixed range with "
    "transformations like torch.exp; (2) if you transform a component, give the transformation a "
    "temperature parameter, as a named constant inside the function, not an input; (3) the reward is "
    "given for the state after the action (`next_*` variables) and every step, so keep per-step "
    "rewards on a scale that the episode length does not blow up."
)


def task_prompt(
    description: EnvDescription, task: str, examples: Sequence[Example] = (), source: str = ""
) -> str:
    """The first user prompt: the env described as a Python class, the task, the format.

    :param description: the env's description.
    :param task: the user's task text.
    :param examples: Text2Reward's few-shot examples (instruction and program).
    :param source: the env's own source code (Eureka's context), shown after the description.
    """
    parts = [f"The Python environment is:\n```python\n{description.to_prompt()}\n```"]
    if source:
        parts.append(
            "The environment's own source code, for how it steps, ends episodes and pays its own "
            "reward (the reward function receives only the variables above, never `self`):\n"
            f"```python\n{source.rstrip()}\n```"
        )
    parts += [
        f"Write a reward function for the following task: {task}",
    ]
    if examples:
        shown = "\n\n".join(
            f"Instruction ({example.env_id}): {example.instruction}\n```python\n{example.program}```"
            for example in examples
        )
        parts.append(
            "Here are reward functions other engineers wrote for similar instructions (their "
            f"environments may differ; use only the variables of this one):\n\n{shown}"
        )
    parts.append(_FORMAT)
    return "\n\n".join(parts)


#: what the next prompt says when an answer of the last iteration hit the token limit
CUT_OFF_NOTE = ("Your previous answer ({keys}) was cut off by the token limit (finish_reason length): write a "
                "shorter one: the ```python block first, few comments, little prose.")


def candidate_line(candidate: Candidate) -> str:
    """One line on what became of a candidate, with what the search noticed about its answer
    (cut off by the token limit, which of several code blocks was trained).

    :param candidate: the candidate.
    """
    return _outcome(candidate) + "".join(f"; note: {note}" for note in answer_notes(candidate))


def answer_notes(candidate: Candidate) -> list[str]:
    """What the search noticed about a candidate's answer, in words for the model.

    :param candidate: the candidate.
    """
    notes = []
    if candidate.finish_reason == "length":
        notes.append("the answer was cut off by the token limit (finish_reason length)")
    if candidate.answer and candidate.genome is None:  # the evolve proposer's answers are programs
        choice = code_choice_note(candidate.answer)
        if choice:
            notes.append(choice)
    return notes


def _outcome(candidate: Candidate) -> str:
    if candidate.ok:
        result = candidate.result
        assert result is not None
        line = f"{candidate.key}: trained, task fitness {result.fitness:.4g}"
        if result.success_rate is not None:
            line += f", success rate {result.success_rate:.2f}"
        signals = candidate.signals
        if signals is not None:
            if signals.correlation is not None:
                line += f", correlation of its reward with the fitness {signals.correlation:+.2f}"
            if signals.hacking:
                line += f"; REWARD HACKING SIGNAL: {signals.reason}"
            elif signals.stuck:
                line += f"; {signals.reason}"
        if result.notes:  # they may quote the program's own text (why it ran per state)
            line += "; notes on how it ran are quoted below"
        return line
    failure = candidate.failure
    if failure is None:
        return f"{candidate.key}: not evaluated"
    # the search's own words (a prescreen finding, where it stopped), on one line
    if failure.kind == PRESCREEN_FAILURE:
        return f"{candidate.key}: not trained: {prompt_line(failure.reason)}"
    if failure.kind == STOPPED:  # "stopped at a third of the budget with fitness f ..."
        return f"{candidate.key}: {prompt_line(failure.reason, LINE_CHARS)}"
    # anything else may hold the program's text: only in its labelled block (failure_details)
    return f"{candidate.key}: failed ({failure.kind}); its output is quoted below"


def _quoted(candidate: Candidate) -> str | None:
    """What the candidate's run reported that may hold the program's own text, as a
    labelled block: its failure, or the notes on how a trained one ran; ``None`` if nothing."""
    failure, result = candidate.failure, candidate.result
    if candidate.ok and result is not None and result.notes:
        return f"{candidate.key}: notes on how it ran. " + program_output("\n".join(result.notes))
    if failure is not None and failure.kind not in (PRESCREEN_FAILURE, STOPPED):
        return f"{candidate.key}: {describe_failure(failure)}"
    return None


def failure_details(candidates: Sequence[Candidate]) -> str | None:
    """Why each failed candidate failed and how each trained one ran where its run noted
    something, the program's output quoted in a labelled block
    (:func:`~rewardlab.llm_reward.search.reflection.program_output`); ``None`` if nothing.

    :param candidates: the candidates, in sample order.
    """
    quoted = [block for block in map(_quoted, candidates) if block is not None]
    if not quoted:
        return None
    return "Details of the last reward functions' runs:\n\n" + "\n\n".join(quoted)


def _best_block(best: Candidate | None) -> str:
    if best is None:
        return ("None of the reward functions so far trained successfully, so there is no best one "
                "yet; write a new one that avoids the failures below.")
    assert best.result is not None
    return (f"The reward function above is the best so far (candidate {best.key}, task fitness "
            f"{best.result.fitness:.4g}). {reflect(best.result, best.signals)}")


def feedback_prompt(
    mode: str,
    last: Sequence[Candidate],
    best: Candidate | None,
    human_feedback: str | None = None,
) -> str:
    """The user message of a feedback round.

    :param mode: ``"eureka"`` or ``"text2reward"``.
    :param last: the candidates of the last iteration, in sample order.
    :param best: the best candidate so far (its program is the assistant message before).
    :param human_feedback: Text2Reward's feedback from a person (``None``: none given).
    """
    parts = []
    if mode == "text2reward" and human_feedback:
        parts.append(f"A person watched the results and gave this feedback:\n\"\"\"\n{human_feedback.strip()}\n\"\"\"")
    parts.append("Results of the last iteration's reward functions:\n"
                 + "\n".join(f"- {candidate_line(candidate)}" for candidate in last))
    parts.append(_best_block(best))
    details = failure_details(last)
    if details is not None:
        parts.append(details)
    cut_off = [candidate.key for candidate in last if candidate.finish_reason == "length"]
    if cut_off:
        parts.append(CUT_OFF_NOTE.format(keys=", ".join(cut_off)))
    if mode == "text2reward" and human_feedback:
        parts.append("Revise the reward function to address the feedback. " + _FORMAT)
    else:
        parts.append(tips() + "\n" + _FORMAT)
    return "\n\n".join(parts)


def conversation(
    first_prompt: str, best: Candidate | None, feedback: str | None
) -> list[Message]:
    """The messages of one iteration.

    :param first_prompt: :func:`task_prompt`'s text.
    :param best: the best candidate so far (its program becomes the assistant message).
    :param feedback: :func:`feedback_prompt`'s text (``None`` in the first iteration).
    """
    messages: list[Message] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": first_prompt},
    ]
    if feedback is None:
        return messages
    if best is not None and best.source is not None:
        messages.append({"role": "assistant", "content": prompt_block(best.source.rstrip(), "python")})
    messages.append({"role": "user", "content": feedback})
    return messages
