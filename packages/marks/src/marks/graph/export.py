"""Writing the graph as GEXF 1.2, GraphML or node-link JSON (what Gephi, Cytoscape and networkx
read), streamed: nodes and edges are written as they are read, so memory stays flat.

Nodes are every bookmark (label, url, domain, tags); edges carry `weight` and its parts.
"""

import re
from collections.abc import Iterator
from typing import TextIO
from xml.sax.saxutils import escape, quoteattr

import msgspec

from marks.graph import GraphEdge, GraphNode
from marks.graph.query import require_built
from marks.store import Store

FORMATS = ("gexf", "graphml", "json")
# Characters XML 1.0 cannot hold at all; titles from the web sometimes carry them.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _attr(value: object) -> str:
    return quoteattr(_NOT_XML.sub("", str(value)))


def _nodes(store: Store) -> Iterator[tuple[int, str, str, str, str]]:
    for bookmark_id, title, url, domain, tags in store.execute(
        "SELECT id, title, url, domain, tags FROM bookmarks ORDER BY id"
    ):
        yield bookmark_id, title or url, url, domain, tags.replace("\n", ", ")


def _edges(store: Store) -> Iterator[tuple[int, int, float, float, str, int]]:
    yield from store.execute(
        "SELECT source, target, weight, tags, coalesce(site, ''), link FROM graph_edges "
        "ORDER BY source, target"
    )


def export(store: Store, fmt: str, out: TextIO) -> tuple[int, int]:
    """Write the graph; returns (nodes, edges)."""
    require_built(store)
    writer = {"gexf": _gexf, "graphml": _graphml, "json": _json}[fmt]
    return writer(store, out)


NODE_FIELDS = (("url", "string"), ("domain", "string"), ("tags", "string"))
EDGE_FIELDS = (("tags", "double"), ("site", "string"), ("link", "integer"))


def _gexf(store: Store, out: TextIO) -> tuple[int, int]:
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write('<gexf xmlns="http://www.gexf.net/1.2draft" version="1.2">\n')
    out.write("  <meta><creator>marks</creator><description>bookmark graph</description></meta>\n")
    out.write('  <graph mode="static" defaultedgetype="undirected">\n')
    out.write('    <attributes class="node">\n')
    for index, (name, kind) in enumerate(NODE_FIELDS):
        out.write(f'      <attribute id="n{index}" title="{name}" type="{kind}"/>\n')
    out.write('    </attributes>\n    <attributes class="edge">\n')
    for index, (name, kind) in enumerate(EDGE_FIELDS):
        out.write(f'      <attribute id="e{index}" title="{name}" type="{kind}"/>\n')
    out.write("    </attributes>\n    <nodes>\n")
    nodes = edges = 0
    for bookmark_id, label, url, domain, tags in _nodes(store):
        nodes += 1
        values = "".join(
            f'<attvalue for="n{i}" value={_attr(v)}/>' for i, v in enumerate((url, domain, tags))
        )
        out.write(
            f'      <node id="{bookmark_id}" label={_attr(label)}><attvalues>{values}'
            "</attvalues></node>\n"
        )
    out.write("    </nodes>\n    <edges>\n")
    for source, target, weight, jaccard, site, link in _edges(store):
        values = "".join(
            f'<attvalue for="e{i}" value={_attr(v)}/>' for i, v in enumerate((jaccard, site, link))
        )
        out.write(
            f'      <edge id="{edges}" source="{source}" target="{target}" '
            f'weight="{weight}"><attvalues>{values}</attvalues></edge>\n'
        )
        edges += 1
    out.write("    </edges>\n  </graph>\n</gexf>\n")
    return nodes, edges


def _graphml(store: Store, out: TextIO) -> tuple[int, int]:
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write(
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
        'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n'
    )
    out.write('  <key id="label" for="node" attr.name="label" attr.type="string"/>\n')
    for name, _ in NODE_FIELDS:
        out.write(f'  <key id="{name}" for="node" attr.name="{name}" attr.type="string"/>\n')
    out.write('  <key id="weight" for="edge" attr.name="weight" attr.type="double"/>\n')
    graphml_kind = {"double": "double", "string": "string", "integer": "int"}
    for name, kind in EDGE_FIELDS:
        out.write(
            f'  <key id="edge_{name}" for="edge" attr.name="{name}" '
            f'attr.type="{graphml_kind[kind]}"/>\n'
        )
    out.write('  <graph id="marks" edgedefault="undirected">\n')
    nodes = edges = 0
    for bookmark_id, label, url, domain, tags in _nodes(store):
        nodes += 1
        data = "".join(
            f"<data key={_attr(k)}>{_text(v)}</data>"
            for k, v in (("label", label), ("url", url), ("domain", domain), ("tags", tags))
        )
        out.write(f'    <node id="{bookmark_id}">{data}</node>\n')
    for source, target, weight, jaccard, site, link in _edges(store):
        edges += 1
        out.write(
            f'    <edge source="{source}" target="{target}">'
            f'<data key="weight">{weight}</data>'
            f'<data key="edge_tags">{jaccard}</data>'
            f'<data key="edge_site">{_text(site)}</data>'
            f'<data key="edge_link">{link}</data></edge>\n'
        )
    out.write("  </graph>\n</graphml>\n")
    return nodes, edges


def _text(value: object) -> str:
    # A bare CR would reach the reader as LF (XML line-end normalisation): keep it as a reference.
    return escape(_NOT_XML.sub("", str(value)), {"\r": "&#13;"})


def _json(store: Store, out: TextIO) -> tuple[int, int]:
    """networkx's node-link format, as `NodeLinkGraph` describes it (written piece by piece)."""
    encode = msgspec.json.Encoder().encode
    out.write('{"directed": false, "multigraph": false, "graph": {"name": "marks"},\n"nodes": [')
    nodes = edges = 0
    for bookmark_id, label, url, domain, tags in _nodes(store):
        out.write(",\n" if nodes else "\n")
        nodes += 1
        node = GraphNode(id=bookmark_id, label=label, url=url, domain=domain, tags=tags)
        out.write(encode(node).decode())
    out.write('\n],\n"edges": [')
    for source, target, weight, jaccard, site, link in _edges(store):
        out.write(",\n" if edges else "\n")
        edges += 1
        edge = GraphEdge(
            source=source, target=target, weight=weight, tags=jaccard, site=site, link=link
        )
        out.write(encode(edge).decode())
    out.write("\n]}\n")
    return nodes, edges
