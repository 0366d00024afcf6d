"""`looprl inspect` on a busy port: a one-line error and exit 2, before any banner."""

import socket

from looprl.cli import main


def test_a_busy_port_is_a_one_line_error_before_the_banner(run_dir, capsys):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["inspect", str(run_dir), "--port", str(port)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"looprl inspect: error: port {port} on 127.0.0.1 is in use; pass --port\n"
