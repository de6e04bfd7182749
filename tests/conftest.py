"""Import the HTTP stack once in the outer process, before any in-process pytester run.

pytester restores ``sys.modules`` after each inner run, so a module first imported inside one
(httpcore's backends, google-genai) is dropped and later imported again as new class objects,
while httpx keeps its exception map of the old ones: an ``httpcore.ReadTimeout`` would then
escape unmapped. Importing them here keeps one copy for the whole session.
"""

import google.genai  # noqa: F401
import httpcore  # noqa: F401
import httpcore._backends.sync  # noqa: F401
import httpx  # noqa: F401
