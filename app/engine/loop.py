"""The speculative decoding loop: draft γ tokens, verify them in one target pass, keep the
longest acceptable prefix plus one target token, roll both caches back, repeat.

A round with γ = 0 is exactly plain decoding, so plain and speculative replies run through the
same code, the same model handle and the same sampling transform; only the draft differs.

Invariant between rounds: `tokens` is prompt + reply so far; the target's cache holds all of it
but the last token, which the next target pass feeds first ([last, d1..dγ]). The reply's first
token comes from the prompt's own pass, before the first round, which then holds the invariant.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from app.engine.confidence import KeepDrafting
from app.engine.config import GenerationConfig
from app.engine.constraint import ConstraintCursor, start_constraint
from app.engine.control import GenerationControl
from app.engine.draft_reading import PROBE_READ_LIMIT, DraftReading
from app.engine.drafters import Draft, Drafter, DraftRequest, constrain_draft
from app.engine.events import Event, FinishEvent, NoticeEvent, RoundEvent, TokenEvent
from app.engine.exact_check import ExactMode
from app.engine.gamma_controllers import GammaControllers
from app.engine.prompt_pass import read_prompt
from app.engine.result import FinishReason, GenerationResult
from app.engine.token_tree import tree_round
from app.engine.verification import Verdict, verify_rows
from app.errors import ContextOverflowError, InvalidSettingError
from app.llama.handle import ModelHandle
from app.llama.token_text import whole_characters
from app.metrics.cost_model import free_draft_limit
from app.metrics.rounds import DraftMode, RoundRecord
from app.metrics.summary import summarize

if TYPE_CHECKING:
    from app.engine.adaptive import GammaController

Clock = Callable[[], float]


class SpeculativeEngine:
    """Generates replies from a target model, speculating with an optional drafter."""

    def __init__(
        self,
        target: ModelHandle,
        drafter: Drafter | None = None,
        *,
        clock: Clock = time.perf_counter,
    ) -> None:
        self.target = target
        self.drafter = drafter
        self._clock = clock
        # Seconds of one plain target step, the cost model's unit (docs/design.md). Measured by a
        # plain round, refreshed by every later one.
        self.plain_step_s: float | None = None
        self._plain_step_depth = 0  # the conversation's length at the latest plain step
        # Accepted tokens the draft has not read yet (rounds that ran without it).
        self._draft_behind = False
        # When the drafter reads what it lacks, and when γ auto leaves a prompt unread.
        self._reading = DraftReading(clock)
        # The reply's grammar state after the tokens kept so far, when it has a grammar.
        self._grammar: ConstraintCursor | None = None
        self._free_draft_limit = free_draft_limit(getattr(target, "n_batch", None))
        self._controllers = GammaControllers(self._free_draft_limit)
        self._exact = ExactMode(target)

    def set_drafter(self, drafter: Drafter | None) -> None:
        self.drafter = drafter

    @property
    def mode(self) -> DraftMode:
        return self.drafter.mode if self.drafter is not None else "plain"

    def generate(
        self,
        prompt_ids: Sequence[int],
        config: GenerationConfig,
        control: GenerationControl | None = None,
        requested_at: float | None = None,
    ) -> Iterator[Event]:
        """Yield TokenEvents and RoundEvents as the reply grows, then one FinishEvent.

        Whether the reply speculates is decided here and only here: config.gamma off, or no
        drafter, is plain decoding; control.speculative pauses drafting between rounds.
        TTFT counts from requested_at (the clock when the request came; default: now): the
        user waits for what ran before the engine too."""
        config.validate()
        control = control or GenerationControl()
        if not prompt_ids:
            raise InvalidSettingError("the prompt is empty")
        if len(prompt_ids) >= self.target.n_ctx:
            raise ContextOverflowError(len(prompt_ids), self.target.n_ctx)
        clock = self._clock
        t_request = clock()
        t_asked = t_request if requested_at is None else requested_at
        rng = np.random.default_rng(config.sampling.seed)
        mode: DraftMode = "plain" if config.gamma.is_off else self.mode
        controller = self.gamma_controller(config) if mode != "plain" else None

        exact_notice = self._exact.begin_reply(config.exact, prompt_ids)
        tokens = list(prompt_ids)
        self._grammar = start_constraint(config.constraint, self.target, len(tokens))
        draft_grammar = config.constraint is not None and config.constraint.draft
        constrain_draft(self.drafter, self._grammar if draft_grammar else None)
        draft_prefill_s, prompt_unread = 0.0, mode != "plain" and self.drafter is not None
        # The prompt's last token is read with the rest and the reply's first token drawn from
        # its row, as llama-server does: the first token waits for no pass of its own, no
        # reading and no draft.
        first_rows = read_prompt(self.target, tokens, control)
        # A stop came while the prompt was being read: the reply ends, cancelled, before its
        # first token.
        stopped_reading = first_rows is None
        self._draft_behind = False
        # Set when γ auto judged that reading the prompt would cost this reply more than
        # drafting saves it: the reply runs plain, and the draft model reads the prompt if the
        # conversation goes on.
        unread_plain = False
        if controller is not None:
            controller.begin_reply(len(tokens))
        t_generation = clock()

        reply: list[int] = []
        from_draft: list[bool] = []
        rounds: list[RoundRecord] = []
        notices: list[str] = []
        if exact_notice:
            notices.append(exact_notice)
            yield NoticeEvent(exact_notice)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        ttft: float | None = None
        finish: FinishReason = "length"
        while True:
            if control.stop_requested or stopped_reading:
                finish = "cancelled"
                break
            remaining = config.max_tokens - len(reply)
            if remaining <= 0:
                finish = "length"
                break
            room = self.target.n_ctx - len(tokens)
            if room < 0:
                finish = "context"
                break
            prompt_step = first_rows is not None
            under_auto = controller is not None and control.gamma is None
            paused = under_auto and mode == "draft" and self._paused(controller)
            # No room for a draft token (the reply's or the context's last): no reading for it.
            if prompt_unread and not prompt_step and min(remaining - 1, room) > 0:
                # A draft model γ auto paused reads nothing until a probe, and the probe only
                # what PROBE_READ_LIMIT allows: the prompt may never be drafted after.
                if paused:
                    self._draft_behind, prompt_unread = True, False
                elif under_auto and (
                    why := self._reading.leave_unread(self.drafter, controller, tokens, remaining)
                ):
                    self._draft_behind, prompt_unread, unread_plain = True, False, True
                    notices.append(why)
                    yield NoticeEvent(why)
                else:
                    draft_prefill_s = self._draft_reads(tokens, controller)
                    prompt_unread = False
            t_round, depth = clock(), len(tokens)
            # No draft for the first token (the prompt's pass draws it), for a prompt the draft
            # has not read, or in a reply γ auto left unread; a γ set by hand mid-reply
            # overrides that judgement, as it overrides γ auto.
            held = prompt_step or prompt_unread or (unread_plain and under_auto)
            gamma = self._round_gamma(config, control, controller, mode, held)
            # Never draft past the token budget or the context: the bonus token needs a row.
            gamma = max(0, min(gamma, remaining - 1, room))
            read_limit = PROBE_READ_LIMIT if paused and self._draft_behind else None
            catchup = gamma > 0 and self._draft_behind and read_limit is None
            catchup_s = self._draft_reads(tokens, controller) if catchup else 0.0
            # A γ set by hand runs as set; under auto the controller may end the draft early,
            # and tokens that cost no draft pass may run past its γ.
            draft_stop = controller.draft_stop() if controller and under_auto else None
            free_limit = min(self._free_draft_limit, remaining - 1, room) if under_auto else None
            draft = self._draft(
                tokens,
                gamma,
                config,
                draft_stop,
                free_limit,
                reply_left=remaining,
                read_limit=read_limit,
            )
            catchup_s += draft.catchup_s
            if draft.steps and read_limit is not None:
                self._draft_behind = draft.partial_context
            # A token tree verifies in one pass, or as its main branch where tree_round says.
            tree = tree_round(
                self.target, tokens, draft, config, rng, clock=clock, grammar=self._grammar
            )
            if first_rows is not None:  # the prompt step's row
                verdict, verify_s = self._verify(tokens, draft, first_rows, config, rng), 0.0
                first_rows = None
            elif tree is None:
                t_verify = clock()
                rows = self.target.feed(tokens + draft.tokens, len(draft.tokens) + 1)
                verify_s = clock() - t_verify
                verdict = self._verify(tokens, draft, rows, config, rng)
            else:
                verdict, verify_s = Verdict(tree.emitted, tree.accepted), tree.seconds

            emitted: list[int] = []
            stop = False
            for i, token in enumerate(verdict.emitted[:remaining]):
                if self.target.is_eog(token):
                    stop = True
                    break
                emitted.append(token)
                reply.append(token)
                from_draft.append(is_draft := i < verdict.accepted)
                ttft = clock() - t_asked if ttft is None else ttft
                text = decoder.decode(self.target.token_bytes(token))
                from_suffix = is_draft and i < draft.suffix_tokens
                logprob = verdict.logprobs[i] if verdict.logprobs else None
                yield TokenEvent(token, text, is_draft, len(reply) - 1, from_suffix, logprob)
            tokens.extend(emitted)
            if prompt_step:
                # Part of the prompt's pass, not a round: its time is the prompt's.
                if stop:
                    finish = "stop"
                    break
                continue

            drafted = len(draft.tokens)
            passes_s = draft.seconds + verify_s + catchup_s
            record = RoundRecord(
                index=len(rounds),
                mode=mode if drafted else "plain",
                # Under the confidence stop, γ was a ceiling: the length that ran is the draft's,
                # but free suffix-index tokens past γ were never asked for (METRIC_DEFINITIONS).
                gamma=gamma if draft_stop is None else min(drafted, gamma),
                drafted=drafted,
                accepted=verdict.accepted,
                emitted=len(emitted),
                draft_s=draft.seconds,
                verify_s=verify_s,
                draft_steps=draft.steps,
                draft_catchup_s=catchup_s,
                suffix_drafted=draft.suffix_tokens,
                tree_nodes=tree.nodes if tree else 0,
                tree_bonus=tree.bonus if tree else 0,
                depth=depth,
                # From choosing γ to here, token events included (a consumer that is slow to
                # take them shows); γ auto's learning after this point is not counted.
                overhead_s=max(0.0, clock() - t_round - passes_s),
            )
            rounds.append(record)
            if mode != "plain" and self.drafter is not None:
                self.drafter.learn(record)
            if drafted == 0:
                self._observe_plain_step(verify_s, depth)
            if draft.steps == 0 and emitted and mode == "draft":
                # The draft model did not run this round, so it has not read these tokens.
                # (Prompt lookup reads the history afresh each round: it is never behind.)
                self._draft_behind = True
            if controller is not None:
                controller.observe(record, draft.margins)
                notice = controller.take_notice()
                if notice:
                    notices.append(notice)
                    yield NoticeEvent(notice)
            yield RoundEvent(record)
            if stop:
                finish = "stop"
                break

        t_end = clock()
        # What the decoder still holds is part of a character the reply was cut in (by its
        # token budget): no text the model wrote, so it is not shown as U+FFFD either.
        stats = summarize(
            rounds,
            prompt_tokens=len(prompt_ids),
            generated_tokens=len(reply),
            prompt_s=t_generation - t_request,
            # The draft model reads the prompt after the first token: the tokens after it wait.
            draft_prefill_s=draft_prefill_s,
            generation_s=t_end - t_generation,
            ttft_s=ttft,
            plain_step_s=self.plain_step_s,
        )
        yield FinishEvent(
            GenerationResult(
                text=whole_characters(b"".join(self.target.token_bytes(t) for t in reply)),
                token_ids=reply,
                finish_reason=finish,
                # The mode is what ran: a reply whose every round was a plain step (speculation
                # switched off, or paused by γ auto throughout) is plain, drafter or not.
                mode=mode if any(r.speculative for r in rounds) else "plain",
                stats=stats,
                rounds=tuple(rounds),
                draft_token_mask=tuple(from_draft),
                notices=tuple(notices),
                plain_step_s=self.plain_step_s,
            )
        )

    # -- one round's parts --------------------------------------------------------------------

    def _round_gamma(
        self,
        config: GenerationConfig,
        control: GenerationControl,
        controller: GammaController | None,
        mode: DraftMode,
        held: bool,
    ) -> int:
        if mode == "plain" or held or not control.speculative or self.drafter is None:
            return 0
        if self.plain_step_s is None:
            # One plain step first: it measures the unit cost that c_draft and c_verify are
            # expressed in.
            return 0
        # A number set during the reply wins over γ auto from the next round on; the
        # controller keeps learning from those rounds, so switching back to Auto resumes well.
        if control.gamma is not None:
            return control.gamma
        if controller is not None:
            return controller.next_gamma()
        return config.gamma.start

    @staticmethod
    def _paused(controller: GammaController | None) -> bool:
        return controller is not None and controller.speculation_off

    def gamma_controller(self, config: GenerationConfig) -> GammaController | None:
        """γ auto's controller for the current draft (app/engine/gamma_controllers.py)."""
        step = None if self.plain_step_s is None else (self.plain_step_s, self._plain_step_depth)
        return self._controllers.get(self.drafter, config, step)

    def _draft_reads(self, tokens: list[int], controller: GammaController | None) -> float:
        """The drafter reads all but the last token (DraftReading.read): it is no longer behind."""
        assert self.drafter is not None
        self._draft_behind = False
        return self._reading.read(self.drafter, tokens, controller)

    def _draft(
        self,
        tokens: list[int],
        gamma: int,
        config: GenerationConfig,
        stop: KeepDrafting | None,
        free_limit: int | None,
        *,
        reply_left: int,
        read_limit: int | None,
    ) -> Draft:
        if gamma == 0 or self.drafter is None:
            return Draft([])
        rng = np.random.default_rng(self._draft_seed(config, len(tokens)))
        return self.drafter.propose(
            DraftRequest(
                tokens,
                gamma,
                config.sampling,
                rng,
                config.p_min,
                stop,
                free_limit,
                reply_left,
                read_limit,
            )
        )

    @staticmethod
    def _draft_seed(config: GenerationConfig, position: int) -> int | None:
        # The draft has its own stream so that switching drafts does not shift the target's
        # random draws; seeded per position so a fixed seed gives a reproducible reply.
        seed = config.sampling.seed
        return None if seed is None else (seed * 1_000_003 + position) & 0xFFFFFFFF

    def _verify(
        self,
        tokens: list[int],
        draft: Draft,
        rows: np.ndarray,
        config: GenerationConfig,
        rng: np.random.Generator,
    ) -> Verdict:
        """The round's verdict, under the reply's grammar as it stands after `tokens`."""
        return verify_rows(
            tokens, draft, rows, config, rng, target=self.target, grammar=self._grammar
        )

    def _observe_plain_step(self, seconds: float, depth: int) -> None:
        self._plain_step_depth = depth
        # A moving average: the first decode after a prompt is noisier than the rest.
        if self.plain_step_s is None:
            self.plain_step_s = seconds
        else:
            self.plain_step_s = 0.8 * self.plain_step_s + 0.2 * seconds
