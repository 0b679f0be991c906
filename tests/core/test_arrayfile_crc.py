"""The array files' checksums: read a chunk at a time into one buffer, same CRC-32."""

import os
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labmem.core import arrayfile
from labmem.core.arrayfile import prefix_crc32, range_crc32


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000), st.data(), st.sampled_from([1, 7, 256, 1 << 18]))
def test_range_crc32_is_zlibs_over_the_range(tmp_path_factory, data, draw, chunk):
    path = tmp_path_factory.mktemp("crc") / "file"
    path.write_bytes(data)
    start = draw.draw(st.integers(0, len(data)))
    end = draw.draw(st.integers(start, len(data)))
    saved, arrayfile._CHUNK = arrayfile._CHUNK, chunk
    fd = os.open(path, os.O_RDONLY)
    try:
        assert range_crc32(fd, start, end) == zlib.crc32(data[start:end])
        assert prefix_crc32(fd, end) == zlib.crc32(data[:end])
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0  # the descriptor's offset is not moved
    finally:
        os.close(fd)
        arrayfile._CHUNK = saved


def test_a_file_shorter_than_the_range_is_an_eof_error(tmp_path):
    path = tmp_path / "file"
    path.write_bytes(b"x" * 100)
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(EOFError, match="ended 20 bytes before 120"):
            range_crc32(fd, 0, 120)
    finally:
        os.close(fd)
