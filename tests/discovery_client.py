"""Real discovery clients for tests/test_discovery.py, run inside the
client's network namespace (``ip netns exec NS python3 discovery_client.py
COMMAND ...``): each command prints its findings as JSON lines.

* ``mdns-browse IP TYPE SECONDS``: browses a DNS-SD service type with the
  ``zeroconf`` package (a complete mDNS/DNS-SD implementation) and resolves
  each instance found: name, port, addresses, TXT properties.
* ``mdns-watch IP TYPE SECONDS``: prints ``ready``, then each instance
  added and removed, until one is removed or time runs out.
* ``wsd-probe IP SECONDS [MOST]``: multicasts a WS-Discovery Probe for
  ``wsdp:Device`` as Windows does and prints each distinct ProbeMatch
  (repeats of one are recognised by their message id), until MOST of them.
* ``wsd-resolve IP ENDPOINT SECONDS [MOST]``: the same with a Resolve for
  an endpoint, and its ResolveMatches.
* ``wsd-get XADDR ENDPOINT``: the WS-Transfer Get of the metadata exchange,
  over HTTP as Windows sends it; prints the metadata.
* ``wsd-listen IP SECONDS``: prints ``ready``, then every Hello and Bye
  multicast on the link, until a Bye or time runs out.

The WS-Discovery side is written here with the socket module and the
standard library's XML parser, following the WS-Discovery (April 2005)
message formats Windows uses; nothing is shared with the server's code.
"""

from __future__ import annotations

import json
import queue
import socket
import sys
import time
import urllib.request
import uuid
import xml.etree.ElementTree as ET

GROUP = "239.255.255.250"
PORT = 3702

NS = {
    "soap": "http://www.w3.org/2003/05/soap-envelope",
    "wsa": "http://schemas.xmlsoap.org/ws/2004/08/addressing",
    "wsd": "http://schemas.xmlsoap.org/ws/2005/04/discovery",
    "wsx": "http://schemas.xmlsoap.org/ws/2004/09/mex",
    "wsdp": "http://schemas.xmlsoap.org/ws/2006/02/devprof",
    "pub": "http://schemas.microsoft.com/windows/pub/2005/07",
}
WSD = NS["wsd"]


def emit(obj) -> None:
    print(json.dumps(obj), flush=True)


def envelope(to: str, action: str, message_id: str, body: str, extra_header: str = "") -> bytes:
    return f"""<?xml version="1.0" encoding="utf-8"?>
<soap:Envelope xmlns:soap="{NS['soap']}" xmlns:wsa="{NS['wsa']}"
    xmlns:wsd="{NS['wsd']}" xmlns:wsdp="{NS['wsdp']}">
<soap:Header>
    <wsa:To>{to}</wsa:To>
    <wsa:Action>{action}</wsa:Action>
    <wsa:MessageID>{message_id}</wsa:MessageID>{extra_header}
</soap:Header>
<soap:Body>{body}</soap:Body>
</soap:Envelope>""".encode()


def text(elem, path: str) -> str | None:
    found = elem.find(path, NS)
    return None if found is None or found.text is None else found.text.strip()


def summary(data: bytes) -> dict:
    """The parts of a received WS-Discovery message the tests look at."""
    root = ET.fromstring(data)
    header = root.find("soap:Header", NS)
    body = root.find("soap:Body", NS)
    out = {
        "action": text(header, "wsa:Action"),
        "message_id": text(header, "wsa:MessageID"),
        "relates_to": text(header, "wsa:RelatesTo"),
        "to": text(header, "wsa:To"),
    }
    for path in ("wsd:ProbeMatches/wsd:ProbeMatch", "wsd:ResolveMatches/wsd:ResolveMatch",
                 "wsd:Hello", "wsd:Bye"):
        match = body.find(path, NS)
        if match is not None:
            out["endpoint"] = text(match, "wsa:EndpointReference/wsa:Address")
            out["types"] = (text(match, "wsd:Types") or "").split()
            out["xaddrs"] = (text(match, "wsd:XAddrs") or "").split()
    return out


def multicast_socket(local_ip: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((local_ip, 0))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(local_ip))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    return sock


def ask(local_ip: str, message: bytes, message_id: str, seconds: float, most: int) -> None:
    """Multicasts a request twice (as SOAP-over-UDP repeats it) and prints
    each distinct reply that relates to it, until `most` of them (0: no
    limit) or the end of the time."""
    sock = multicast_socket(local_ip)
    for _ in range(2):
        sock.sendto(message, (GROUP, PORT))
    seen = set()
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            data, sender = sock.recvfrom(65536)
        except socket.timeout:
            break
        reply = summary(data)
        if reply["relates_to"] != message_id or reply["message_id"] in seen:
            continue
        seen.add(reply["message_id"])
        reply["from"] = f"{sender[0]}:{sender[1]}"
        emit(reply)
        if len(seen) == most:
            break


def wsd_probe(local_ip: str, seconds: str, most: str = "0") -> None:
    message_id = uuid.uuid4().urn
    probe = envelope("urn:schemas-xmlsoap-org:ws:2005:04:discovery", f"{WSD}/Probe", message_id,
                     "<wsd:Probe><wsd:Types>wsdp:Device</wsd:Types></wsd:Probe>")
    ask(local_ip, probe, message_id, float(seconds), int(most))


def wsd_resolve(local_ip: str, endpoint: str, seconds: str, most: str = "0") -> None:
    message_id = uuid.uuid4().urn
    resolve = envelope(
        "urn:schemas-xmlsoap-org:ws:2005:04:discovery", f"{WSD}/Resolve", message_id,
        f"<wsd:Resolve><wsa:EndpointReference><wsa:Address>{endpoint}</wsa:Address>"
        "</wsa:EndpointReference></wsd:Resolve>")
    ask(local_ip, resolve, message_id, float(seconds), int(most))


def wsd_get(xaddr: str, endpoint: str) -> None:
    message_id = uuid.uuid4().urn
    get = envelope(
        endpoint, "http://schemas.xmlsoap.org/ws/2004/09/transfer/Get", message_id, "",
        f"<wsa:ReplyTo><wsa:Address>{NS['wsa']}/role/anonymous</wsa:Address></wsa:ReplyTo>"
        f"<wsa:From><wsa:Address>{uuid.uuid4().urn}</wsa:Address></wsa:From>")
    request = urllib.request.Request(xaddr, data=get, method="POST", headers={
        "Content-Type": "application/soap+xml", "User-Agent": "WSDAPI"})
    with urllib.request.urlopen(request, timeout=10) as response:
        status, content_type, data = response.status, response.headers["Content-Type"], response.read()
    root = ET.fromstring(data)
    header = root.find("soap:Header", NS)
    metadata = root.find("soap:Body/wsx:Metadata", NS)
    host = metadata.find(
        "wsx:MetadataSection/wsdp:Relationship[@Type='http://schemas.xmlsoap.org/ws/2006/02/"
        "devprof/host']/wsdp:Host", NS)
    emit({
        "status": status,
        "content_type": content_type,
        "action": text(header, "wsa:Action"),
        "relates_to": text(header, "wsa:RelatesTo"),
        "message_id": message_id,
        "friendly_name": text(metadata, "wsx:MetadataSection/wsdp:ThisDevice/wsdp:FriendlyName"),
        "host_endpoint": text(host, "wsa:EndpointReference/wsa:Address"),
        "host_types": (text(host, "wsdp:Types") or "").split(),
        "computer": text(host, "pub:Computer"),
    })


def wsd_listen(local_ip: str, seconds: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((GROUP, PORT))
    mreq = socket.inet_aton(GROUP) + socket.inet_aton(local_ip)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    emit("ready")
    seen = set()
    deadline = time.monotonic() + float(seconds)
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            data, sender = sock.recvfrom(65536)
        except socket.timeout:
            break
        message = summary(data)
        if message["message_id"] in seen:
            continue
        seen.add(message["message_id"])
        message["from"] = f"{sender[0]}:{sender[1]}"
        emit(message)
        if message["action"] == f"{WSD}/Bye":
            break


def zeroconf_for(local_ip: str):
    from zeroconf import IPVersion, Zeroconf

    return Zeroconf(interfaces=[local_ip], ip_version=IPVersion.V4Only)


def resolved(zc, service_type: str, name: str) -> dict:
    info = zc.get_service_info(service_type, name, timeout=5000)
    if info is None:
        return {"name": name, "resolved": False}
    return {
        "name": name,
        "resolved": True,
        "server": info.server,
        "port": info.port,
        "addresses": info.parsed_addresses(),
        "properties": {k.decode(): (v.decode() if v is not None else None)
                       for k, v in info.properties.items()},
    }


def mdns_browse(local_ip: str, service_type: str, seconds: str) -> None:
    """Waits for the first instance, gives others a moment to answer too,
    then resolves each."""
    from zeroconf import ServiceBrowser, ServiceStateChange

    zc = zeroconf_for(local_ip)
    names: queue.Queue = queue.Queue()

    def changed(zeroconf, service_type, name, state_change):
        if state_change is ServiceStateChange.Added:
            names.put(name)

    browser = ServiceBrowser(zc, service_type, handlers=[changed])
    found = []
    try:
        found.append(names.get(timeout=float(seconds)))
        time.sleep(0.5)
        while not names.empty():
            found.append(names.get())
    except queue.Empty:
        pass
    for name in dict.fromkeys(found):
        emit(resolved(zc, service_type, name))
    browser.cancel()
    zc.close()


def mdns_watch(local_ip: str, service_type: str, seconds: str) -> None:
    from zeroconf import ServiceBrowser, ServiceStateChange

    zc = zeroconf_for(local_ip)
    events: queue.Queue = queue.Queue()

    def changed(zeroconf, service_type, name, state_change):
        events.put((name, state_change))

    browser = ServiceBrowser(zc, service_type, handlers=[changed])
    emit("ready")
    deadline = time.monotonic() + float(seconds)
    while (left := deadline - time.monotonic()) > 0:
        try:
            name, change = events.get(timeout=left)
        except queue.Empty:
            break
        if change is ServiceStateChange.Added:
            emit({"event": "added", **resolved(zc, service_type, name)})
        elif change is ServiceStateChange.Removed:
            emit({"event": "removed", "name": name})
            break
    browser.cancel()
    zc.close()


COMMANDS = {
    "mdns-browse": mdns_browse,
    "mdns-watch": mdns_watch,
    "wsd-probe": wsd_probe,
    "wsd-resolve": wsd_resolve,
    "wsd-get": wsd_get,
    "wsd-listen": wsd_listen,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
