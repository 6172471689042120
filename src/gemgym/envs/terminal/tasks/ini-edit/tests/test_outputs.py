import configparser
from pathlib import Path


def parsed():
    c = configparser.ConfigParser()
    c.read("/app/config.ini")
    return c


def test_server_port():
    assert parsed()["server"]["port"] == "8080"


def test_database_port_kept():
    assert parsed()["database"]["port"] == "5432"


def test_other_lines_kept():
    lines = Path("/app/config.ini").read_text().splitlines()
    assert lines[0] == "; service configuration"
    assert "workers = 4" in lines and "level = info" in lines and len(lines) == 12
