"""Which sample model an event's samples call for (spec/inference.md, "Sample models").

What a sample stands for depends on the event that took it:

* a **precise instruction event** samples retired instructions, every one equally likely,
  with the IP of the instruction itself (Intel PEBS ``instructions:pp`` /
  ``inst_retired.prec_dist``, AMD IBS op sampling, ARM SPE): samples per instruction of a
  block estimate its executions without bias -- the ``precise`` model;
* a **timer or cycle event** (``cpu-clock``, ``task-clock``, ``cycles``, ``ref-cycles``)
  samples time: a block collects samples in proportion to executions times the time of
  one execution, and a non-precise interrupt puts the IP one instruction late -- the
  ``time`` model;
* any other event (cache misses, branch misses, page faults ...) is proportional to
  neither: bbmap uses the ``time`` model and says so, since nothing better is known.

Events are told apart by the names perf gives them (``base:modifiers``; the ``p``
modifiers are the attr's ``precise_ip``, and bbmap's reader names an event without
``EVENT_DESC`` the same way), so a Parquet aggregate, which keeps the names, gets the
model of the perf.data files it was made from.
"""

from __future__ import annotations

from dataclasses import dataclass

from bbmap.inference.weights import PRECISE_MODEL, TIME_MODEL

# event names (before any ``:modifiers``) that count retired instructions
INSTRUCTION_EVENTS = ("instructions", "inst_retired.any", "inst_retired.any_p",
                      "inst_retired.prec_dist", "inst_retired.ref_cycles", "ibs_op",
                      "arm_spe", "arm_spe_0", "cpu_core/instructions", "cpu_atom/instructions")
# ... that are precise whatever their modifiers (sampled by precise hardware itself)
ALWAYS_PRECISE = ("inst_retired.prec_dist", "ibs_op", "arm_spe", "arm_spe_0")
# events proportional to time
TIME_EVENTS = ("cpu-clock", "task-clock", "cycles", "cpu-cycles", "ref-cycles",
               "cpu_clk_unhalted.thread", "cpu_clk_unhalted.thread_p",
               "cpu_clk_unhalted.ref_tsc", "cpu_core/cycles", "cpu_atom/cycles")


@dataclass(frozen=True)
class EventModel:
    """The sample model an event's samples call for, and why."""

    event: str  # the event's name as perf gives it ("" when unknown)
    model: str  # PRECISE_MODEL or TIME_MODEL
    precise: int  # the precise_ip level its modifiers ask for (0-3)
    why: str  # one sentence, for the outputs

    def to_json(self) -> dict:
        return {"event": self.event, "model": self.model, "precise_ip": self.precise,
                "why": self.why}


def split_event(name: str) -> tuple[str, str]:
    """(base, modifiers) of a perf event name: ``instructions:upp`` -> (instructions,
    upp); ``cpu/event=0xc0,umask=1/pp`` -> (cpu/event=0xc0,umask=1, pp)."""
    name = name.strip()
    if name.count("/") >= 2 and not name.endswith("/"):  # pmu/terms/modifiers
        head, _, mods = name.rpartition("/")
        return head, mods.lstrip(":")
    base, _, mods = name.partition(":")
    return base.rstrip("/"), mods


def event_model(name: str) -> EventModel:
    """The model for one event name."""
    base, mods = split_event(name)
    low = base.lower()
    precise = min(mods.count("p") + (3 if "P" in mods else 0), 3)
    is_insn = low in INSTRUCTION_EVENTS or low.startswith(("inst_retired.", "ibs_op",
                                                           "arm_spe"))
    if is_insn and (precise or low in ALWAYS_PRECISE or low.startswith(("ibs_op",
                                                                        "arm_spe"))):
        return EventModel(name, PRECISE_MODEL, precise,
                          "precise instruction samples: per-instruction weights")
    if is_insn:
        return EventModel(name, TIME_MODEL, precise,
                          "instruction samples without precise_ip skid like a timer's: "
                          "the time model")
    if low in TIME_EVENTS or low.startswith("cpu_clk_unhalted"):
        return EventModel(name, TIME_MODEL, precise,
                          "timer or cycle samples: time per instruction, skid undone")
    return EventModel(name, TIME_MODEL, precise,
                      f"{base or 'the event'} is proportional to neither time nor "
                      "instructions: the time model, counts doubtful")


def profile_model(events: list[str]) -> EventModel:
    """The model for a profile whose samples come from ``events`` (names): precise only
    when every event is a precise instruction event."""
    models = [event_model(e) for e in events if e]
    if not models:
        return EventModel("", TIME_MODEL, 0, "the event is unknown: the time model")
    if len(models) == 1:
        return models[0]
    name = ",".join(m.event for m in models)
    if all(m.model == PRECISE_MODEL for m in models):
        return EventModel(name, PRECISE_MODEL, min(m.precise for m in models),
                          "precise instruction samples: per-instruction weights")
    return EventModel(name, TIME_MODEL, 0,
                      "samples of several events, not all precise: the time model")
