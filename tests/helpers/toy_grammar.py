"""A grammar over the exactness harness's six-token world (tests/helpers/exact_engine.py).

The rule forbids the token the target likes best, the one that counts up from the last reply
token (the first reply token may not be 0), so the constrained distribution is far from the
plain one and a mask applied to the wrong model shows. The end token is always allowed.
`constrained` is the target's logit function with the rule applied, for the plain oracle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.engine.constraint_types import TokenConstraint
from app.llama.handle import ModelHandle
from tests.helpers.exact_engine import EOS, PROMPT, TARGET
from tests.helpers.fake_llama import Logits


def forbidden(reply: Sequence[int]) -> int:
    return (reply[-1] + 1) % EOS if reply else 0


class NoCountingUp:
    def __init__(self, reply: Sequence[int] = ()) -> None:
        self.reply = list(reply)

    def mask(self, logits: Logits) -> Logits:
        out = logits.copy()
        out[forbidden(self.reply)] = -np.inf
        return out

    def allowed(self, tokens: Sequence[int]) -> list[bool]:
        return [t != forbidden(self.reply) for t in tokens]

    def accept(self, token: int) -> None:
        # No check: a mutant that verifies without the mask must reach the fit test, not stop.
        self.reply.append(token)

    def fork(self) -> TokenConstraint:
        return NoCountingUp(self.reply)

    def close(self) -> None:
        """Nothing native."""


@dataclass(frozen=True)
class NoCountingUpSpec:
    draft: bool = True

    def start(self, target: ModelHandle) -> TokenConstraint:
        del target
        return NoCountingUp()


def constrained(history: Sequence[int]) -> Logits:
    return NoCountingUp(history[len(PROMPT) :]).mask(TARGET(history))
