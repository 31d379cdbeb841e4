"""The names of a program's reward components: the one rule for a name (an identifier), how
a label is made one, and the limits on their number and length.

The same rule holds at both trust boundaries: in the program's process, which checks what
the program returns, and in the search, which reads the sandbox's results.
"""

from __future__ import annotations

import ast
import re
import unicodedata

from rewardlab.llm_reward.programs.errors import ProgramError

__all__ = ["COMPONENT_NAME", "COMPONENT_PREFIX", "MAX_COMPONENTS", "plain_component_name"]

BARE_COMPONENT = "reward"
#: the most components a program may return; the caller of the sandbox takes no more
MAX_COMPONENTS = 32
#: the prefix of a program's components among a training's reward components
#: (:class:`~rewardlab.llm_reward.programs.wrapper.ProgramReward`, the sandboxed training)
COMPONENT_PREFIX = "program/"
#: the longest component tag, prefix included, as TensorBoard tags and reports take them;
#: also the longest name a program may give a component before it is made plain
MAX_COMPONENT_TAG_CHARS = 64
#: the longest component name, once made plain (:func:`plain_component_name`)
MAX_COMPONENT_NAME_CHARS = MAX_COMPONENT_TAG_CHARS - len(COMPONENT_PREFIX)
#: a component's name: an identifier, the one rule at both trust boundaries (the program's
#: process and the search that reads its results)
COMPONENT_NAME = re.compile(rf"[A-Za-z_][A-Za-z0-9_]{{0,{MAX_COMPONENT_NAME_CHARS - 1}}}")


def plain_component_name(name: str) -> str:
    """``name`` as :data:`COMPONENT_NAME` takes it. A name is a label: one that is not an
    identifier becomes one, its letters and digits kept (accents dropped) and every run of
    anything else made one ``_`` ("cart position (m)" is "cart_position_m"), ``_`` put
    before a leading digit, cut to :data:`MAX_COMPONENT_NAME_CHARS` characters.

    :raises ProgramError: the name has no letter or digit to keep (``""``, ``"!!"``).
    """
    if COMPONENT_NAME.fullmatch(name):
        return name
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    words = re.findall(r"[A-Za-z0-9]+", folded)
    if not words:
        raise ProgramError(f"component names are identifiers (letters, digits and _, not starting "
                           f"with a digit), such as 'speed_bonus'; got {name!r:.80}, which has no "
                           "letter or digit")
    plain = "_".join(words)
    return ("_" + plain if plain[0].isdigit() else plain)[:MAX_COMPONENT_NAME_CHARS].rstrip("_")


def component_name_notes(function: ast.FunctionDef) -> tuple[str, ...]:
    """A note for each component name the reward function writes as a string that is not an
    identifier (in the dict it returns, or that it fills under the name it returns), saying
    the name it is reported under."""
    returned = [node.value.elts[1] for node in ast.walk(function) if isinstance(node, ast.Return)
                and isinstance(node.value, ast.Tuple) and len(node.value.elts) == 2]
    names = {node.id for node in returned if isinstance(node, ast.Name)}
    dicts = [node for node in returned if isinstance(node, ast.Dict)]
    keys: list[ast.expr | None] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
                isinstance(target, ast.Name) and target.id in names for target in node.targets):
            dicts.append(node.value)
        elif (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in names):
            keys.append(node.slice)
    keys += [key for node in dicts for key in node.keys]
    notes: dict[str, None] = {}
    for key in keys:
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            continue
        try:
            plain = plain_component_name(key.value)
        except ProgramError:
            continue  # the run says why, naming the component
        if plain != key.value:
            notes[f"the component {key.value!r:.80} is reported as {plain} (component names are "
                  "identifiers)"] = None
    return tuple(notes)[:MAX_COMPONENTS]
