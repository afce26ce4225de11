"""An analysis job at one party (`vfl analyze`): load and check its dataset as a training
job does, align the rows by PSI, then bin, count and measure every column
(`party.analysis.run`), and report; nothing is trained or kept.

Every aligned row is analysed (no validation rows are held out; test datasets are not
read).
"""

from __future__ import annotations

import logging
import time

from vfl.contract.states import ALIGNING, ANALYZING
from vfl.party.analysis.run import analyse, early_keys
from vfl.party.compute import log_tasks
from vfl.party.errors import DataError, JobError
from vfl.party.job import PartyJob
from vfl.party.state.snapshots import Snapshots
from vfl.party.tables.table import RawTable
from vfl.party.training.context import Reporter
from vfl.secure.channel import Channel

log = logging.getLogger(__name__)


class AnalysisJob(PartyJob):
    """A job of `JobSpec.analyze` at one party."""

    def prepare(self) -> RawTable:
        """Load and check the dataset (`PartyJob.prepare`), and refuse a LIBSVM one.

        Raises:
            DataError: as `PartyJob.prepare`, or a LIBSVM table.
        """
        self.test_dataset = None  # an analysis reads the training rows only
        raw = super().prepare()
        if raw.sparse is not None:
            message = (
                f"party '{self.party_id}': dataset '{raw.name}' is a LIBSVM table; WOE and "
                "IV take CSV or Parquet tables"
            )
            raise DataError(message, public=message)
        return raw

    def run(self, channel: Channel, reporter: Reporter) -> dict:
        raw = self.prepare() if self.raw is None else self.raw
        self.raw = None
        started = time.monotonic()
        early = early_keys(self.spec, self.party_id)  # while PSI runs
        reporter.stage(ALIGNING)
        order, psi = self._align(channel, raw, "psi", self.dataset)
        reporter.aligned(psi.intersection_size, round(psi.seconds, 3), 0)
        if len(order) == 0:
            raise JobError("the parties hold no common ids: there is nothing to analyse")
        reporter.stage(ANALYZING)
        tick = time.monotonic()
        analysed = analyse(
            channel, self.spec, raw, order, self.executor, self.sharing, False, early
        )
        log.info(
            "party %s: analysed %d columns over %d rows in %.2f s",
            self.party_id,
            len(analysed.report.columns),
            len(order),
            time.monotonic() - tick,
        )
        if self._reads_sql():
            Snapshots(self.state, self.job_id, self.party_id).drop("the job ended")
        channel.close()
        log_tasks(self.executor, self.party_id)
        return {
            "rounds": 1,
            "seconds": round(time.monotonic() - started, 3),
            "bytes_sent": channel.stats.bytes_sent,
            "analysis": analysed.report,
        }
