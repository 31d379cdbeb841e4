"""Why a candidate failed: one record, cut to size when it is made.

A failure's texts come from the program (its error messages, its traceback), from the
static checks of its source (one finding per problem: a program can have tens of
thousands) and from the search itself. They go into the journal, ``report.md`` and the
next prompt, so every text and the list of findings is cut here, where a failure is
made, whatever made it: a program with 66,000 findings made a 7.5 MB reason, a 7.6 MB
prompt and a 15.6 MB report before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "CHECK_FAILURE",
    "MAX_DETAILS_CHARS",
    "MAX_FINDINGS",
    "MAX_FINDING_CHARS",
    "MAX_REASON_CHARS",
    "MAX_TRACEBACK_CHARS",
    "NO_CODE_FAILURE",
    "Failure",
    "check_failure",
    "cut",
]

#: kinds of failure found before anything runs (evaluations add their own kinds)
NO_CODE_FAILURE = "no_code"
CHECK_FAILURE = "check"
#: the most characters of a failure's reason
MAX_REASON_CHARS = 4000
#: the most characters of its traceback (cut to the program's own lines already)
MAX_TRACEBACK_CHARS = 8000
#: the most characters of the worker's log kept with a crash
MAX_DETAILS_CHARS = 2000
#: the most static-check findings kept (the first ones: a program with more has one problem
#: repeated, and the model needs to see it, not all of it)
MAX_FINDINGS = 20
#: the most characters of one finding
MAX_FINDING_CHARS = 500
#: what a failure's kind may be: a short word
_KIND = re.compile(r"[a-z_]{1,40}")


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (more or less the note), saying how much was cut.

    :param text: any text.
    :param limit: the most characters to keep.
    """
    if len(text) <= limit:
        return text
    note = f" ... [{len(text) - limit:,} more characters cut]"
    return text[: max(0, limit - len(note))] + note


@dataclass
class Failure:
    """Why an evaluation failed; every text is cut to its limit when the record is made.

    :param kind: ``"no_code"`` (no program in the answer), ``"check"`` (static checks),
        ``"program"`` (the program raised, returned something malformed or non-finite, or
        changed its inputs), ``"sandbox"`` (the kernel refused a system call outside the
        program's allowlist, caught or not, named where the kernel can notify; or the
        Python guard saw an attempt, worded for the LLM), ``"timeout"``, ``"limit"`` (CPU
        time, memory or file size), ``"crash"`` (the
        worker died) or ``"error"`` (training failed for another reason).
    :param reason: what went wrong, in words fit to send back to an LLM
        (:data:`MAX_REASON_CHARS`).
    :param traceback: the traceback cut to the program's own lines (file
        ``<reward_program>``), when there is one (:data:`MAX_TRACEBACK_CHARS`).
    :param findings: the static-check findings (``kind == "check"``), one per line
        (at most :data:`MAX_FINDINGS` of :data:`MAX_FINDING_CHARS` each, the last saying how
        many more there were).
    :param details: the end of the worker's log, for crashes (:data:`MAX_DETAILS_CHARS`).
    """

    kind: str
    reason: str
    traceback: str = ""
    findings: list[str] = field(default_factory=list)
    details: str = ""

    def __post_init__(self) -> None:
        # a kind is a word the search knows; a worker's own (markup, escapes) is not one
        self.kind = self.kind if _KIND.fullmatch(str(self.kind)) else "error"
        self.reason = cut(str(self.reason), MAX_REASON_CHARS)
        self.traceback = cut(str(self.traceback), MAX_TRACEBACK_CHARS)
        self.details = cut(str(self.details), MAX_DETAILS_CHARS)
        self.findings = _capped_findings(self.findings)

    @classmethod
    def from_dict(cls, data: object) -> Failure | None:
        """A failure from :func:`vars`' output, read back from a journal or a worker: texts
        must be text (they are then cut to size), findings a list.

        :param data: the plain data, or ``None`` for no failure.
        :raises ValueError: a field is not of its type, naming it.
        """
        if data is None:
            return None
        if not isinstance(data, dict):
            raise ValueError(f"a failure record is {type(data).__name__}, not an object")
        texts = {}
        for name, default in (("kind", None), ("reason", None), ("traceback", ""), ("details", "")):
            value = data.get(name, default)
            if not isinstance(value, str):
                kind = "null" if value is None else type(value).__name__
                raise ValueError(f"a failure record's {name} is {kind}, not text")
            texts[name] = value
        findings = data.get("findings", [])
        if not isinstance(findings, list):
            kind = type(findings).__name__
            raise ValueError(f"a failure record's findings are {kind}, not a list")
        return cls(findings=[str(finding) for finding in findings], **texts)


def _capped_findings(findings: Sequence[object]) -> list[str]:
    if len(findings) <= MAX_FINDINGS:  # a list cut before stays as it is
        return [cut(str(finding), MAX_FINDING_CHARS) for finding in findings]
    kept = [cut(str(finding), MAX_FINDING_CHARS) for finding in findings[: MAX_FINDINGS - 1]]
    return [*kept, f"... and {len(findings) - len(kept):,} more findings"]


def check_failure(findings: Sequence[object]) -> Failure:
    """The failure of a program the static checks rejected, from their findings (any number).

    :param findings: the findings (:class:`~rewardlab.llm_reward.programs.checks.Finding` or text).
    """
    kept = _capped_findings(findings)
    return Failure(CHECK_FAILURE, "the program failed the static checks: " + "; ".join(kept), findings=kept)
