"""The test servers themselves: a port taken between its choice and the server's bind
is retried (`make test` beside another suite lost that race: "address already in
use")."""

import socket

import pyarrow.fs as pafs
import pytest

from .servers import SeaweedFS


@pytest.mark.slow  # two starts of the server: 25 s at a load of 24 on 2 cores
def test_the_s3_server_takes_other_ports_when_its_port_was_taken(tmp_path):
    server = SeaweedFS(tmp_path)
    taken = server.ports["s3"]
    with socket.socket() as holder:  # another process binds that port first
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        try:
            server.start()
            assert server.ports["s3"] != taken
            assert server.env["AWS_ENDPOINT_URL"] == f"http://127.0.0.1:{server.ports['s3']}"
            uri = server.bucket("taken")
            server.filesystem().create_dir("taken/x")
            listed = server.filesystem().get_file_info(pafs.FileSelector("taken"))
            assert (uri, [info.base_name for info in listed]) == ("s3://taken", ["x"])
        finally:
            server.stop()
