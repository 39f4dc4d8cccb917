"""Remote offload: producers whose work may run on Dask workers holding
resources (an accelerator, a faster node), as the engine's external work.

Mark a producer with ``remote=ef.remote.Remote(resources={"GPU": 1})``;
run the job with a ``distributed.Client`` current (or give ``client=``).
For each batch the offloader decides from measurements whether it runs
locally or goes to a worker the Dask scheduler picks; several batches
travel in one request, several requests are out at once, and no engine
thread waits while they are. ``result.report["remote"]`` shows, per module,
local and remote calls, bytes, round-trip times and the decision. See
``docs/remote.md``.
"""

from ._errors import RemoteError, RemoteNotice
from ._offloader import Offloader
from ._spec import Remote
from ._worker import RemoteEvents

__all__ = ["Offloader", "Remote", "RemoteError", "RemoteEvents", "RemoteNotice"]
