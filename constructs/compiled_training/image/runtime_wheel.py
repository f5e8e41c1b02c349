"""The training runtime as a wheel, built at synth from the installed distribution.

The image installs this wheel, so what goes into it is the ``compiled_training_runtime`` this
Python imports (from a wheel, or an editable checkout), never a repository folder. The bytes
depend only on the package's files and metadata: sorted entries, a fixed timestamp and mode,
no compression (zlib builds differ between machines), so an unchanged runtime gives an
unchanged image tag and template.
"""

from __future__ import annotations

import base64
import hashlib
import stat
import zipfile
from importlib import metadata
from io import BytesIO
from pathlib import Path

import compiled_training_runtime
from compiled_training.definition.sourcedir import source_files

DISTRIBUTION = "compiled-training-runtime"
PACKAGE_DIR = Path(compiled_training_runtime.__file__).parent
# What pip reads from METADATA; the rest (home page, description) is not the image's concern.
_METADATA_FIELDS = ("Name", "Version", "Summary", "Requires-Python", "Requires-Dist")
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold


def runtime_wheel() -> tuple[str, bytes]:
    """The wheel's file name (``compiled_training_runtime-<version>-py3-none-any.whl``), bytes."""
    installed = metadata.metadata(DISTRIBUTION)
    version = installed["Version"]
    stem = f"{DISTRIBUTION.replace('-', '_')}-{version}"
    files = {f"{PACKAGE_DIR.name}/{relative.as_posix()}": (PACKAGE_DIR / relative).read_bytes()
             for relative in source_files(PACKAGE_DIR)}
    lines = ["Metadata-Version: 2.1"] + [
        f"{field}: {value}" for field in _METADATA_FIELDS
        for value in installed.get_all(field) or ()]
    files[f"{stem}.dist-info/METADATA"] = "\n".join(lines).encode() + b"\n"
    files[f"{stem}.dist-info/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: compiled-training\n"
                                        b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = f"{stem}.dist-info/RECORD"
    files[record] = "".join(
        f"{name},sha256={_urlsafe_digest(data)},{len(data)}\n" for name, data in files.items()
    ).encode() + f"{record},,\n".encode()
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as wheel:
        # The package first, RECORD last, as the wheel specification recommends.
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
            entry.create_system = 3  # Unix, so that the mode below is read
            entry.external_attr = (stat.S_IFREG | 0o644) << 16
            wheel.writestr(entry, data)
    return f"{stem}-py3-none-any.whl", buffer.getvalue()


def _urlsafe_digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
