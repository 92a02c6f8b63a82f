"""Model of the ACL firewall (sw/desc/nt/acl.py): the rules in order, first terminal match wins."""

from ...desc.nt.acl import AclAction, AclConfig
from ...desc.meta import L3Kind
from ..counter_bank import bank_counts, store_bank_counts
from ..parser_model import ParserModel
from ..traffic import random_packets
from .base import TaskModel, exact_size_frames

__all__ = ["AclModel"]


class AclModel(TaskModel):
    config_class = AclConfig

    def configure(self, config):
        super().configure(config)
        self.hits = [0] * self.params["rules"]

    def apply(self, frame, meta):
        if meta["l3_kind"][0] == L3Kind.NONE:
            return None
        verdict = self.config.default
        for index, rule in enumerate(self.config.rules):
            if rule.matches(meta["flow"]):
                self.hits[index] += 1
                if rule.action != AclAction.COUNT:
                    verdict = rule.action
                    break
        meta["drop"] = int(verdict == AclAction.DROP)
        return frame, meta

    def _flows(self, frames):
        parser = ParserModel(self.header_bytes)
        return [parser.parse(f)["flow"] for f in frames]

    def test_case(self, rng, n, malformed):
        frames = [f for _, f in random_packets(n, rng.randrange(2 ** 32), "mixed", malformed,
                                               flows=64)]
        return AclConfig.random(rng, self.params, self._flows(frames[:200])), frames

    def saturation_case(self, rng, n, size):
        frames = exact_size_frames(rng, n, size)
        return AclConfig.random(rng, self.params, self._flows(frames[:50])), frames

    # --- state moved from and to the hardware (hw/transform) -----------------------------------
    def load_hw_tables(self, values):
        self.hits = bank_counts(values, self.hw("hits"), self.params["rules"])

    def store_hw_tables(self, values):
        store_bank_counts(values, self.hw("hits"), self.hits)

    async def verify_hardware(self, access):
        problems = []
        for index, want in enumerate(self.hits):
            await access.write("hit_index", index)
            got = await access.read("hit_count")
            if got != want:
                problems.append(f"rule {index}: hit_count {got}, model {want}")
        return problems
