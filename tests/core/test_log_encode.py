"""``JsonlLog(encode=...)``: a layer chooses how a record becomes a line (issue 17: the memory
service appends a checksum); the default stays ``encode_json_line``."""

from labmem.core.storage import JsonlLog, encode_json_line


def test_a_log_writes_its_lines_with_the_encoder_it_was_given(tmp_path):
    def tagged(record):
        return encode_json_line(record)[:-2] + b',"tag":1}\n'

    log = JsonlLog(tmp_path / "log.jsonl", decode=lambda n, obj: obj, encode=tagged)
    with log.locked():
        log.refresh()
        log.append_many([{"a": 1}, {"a": 2}])
    assert (tmp_path / "log.jsonl").read_bytes() == b'{"a":1,"tag":1}\n{"a":2,"tag":1}\n'
    assert JsonlLog(tmp_path / "log.jsonl", decode=lambda n, obj: obj).refresh() == [
        {"a": 1, "tag": 1}, {"a": 2, "tag": 1}]


def test_the_default_encoder_is_the_plain_json_line(tmp_path):
    log = JsonlLog(tmp_path / "log.jsonl", decode=lambda n, obj: obj)
    log.append({"a": 1})
    assert (tmp_path / "log.jsonl").read_bytes() == encode_json_line({"a": 1})
