"""A reply file's text for contain/match checks: text types decoded, a PDF's pages through pypdf."""

from __future__ import annotations

import pytest

from fabtest.conversation import Attachment
from fabtest.engine.file_checks import check_reply_files, file_text


def _pdf(text: str) -> bytes:
    """A one-page PDF showing ``text`` (Helvetica), with a correct cross-reference table."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_text_and_pdf_files_give_their_text_and_an_image_none() -> None:
    pytest.importorskip("pypdf")
    assert file_text(Attachment.from_bytes(b'{"total": 42}', name="r.json")) == '{"total": 42}'
    assert "Claim number 4711" in (file_text(Attachment.from_bytes(_pdf("Claim number 4711"), name="c.pdf")) or "")
    assert file_text(Attachment.from_bytes(b"\x89PNG", name="x.png")) is None


def test_the_reply_check_names_what_the_reply_carried() -> None:
    files = [Attachment.from_bytes(b"a", name="notes.txt")]
    assert check_reply_files(files, image=True) == (False, "the reply has no image; it carried notes.txt "
                                                           "(text/plain, 1 B)")
    assert check_reply_files(files, pattern="*.TXT")[0]  # names match in any case
    assert check_reply_files([], pattern="*.pdf") == (False, 'the reply has no file matching "*.pdf"; it carried no file')
