"""Reading a graph export back with networkx, as Gephi's and Cytoscape's users would."""

import io
import json

import networkx


def read_graph(fmt: str, data: bytes, node_type: type = str) -> networkx.Graph:
    """`data` as marks wrote it in `fmt` (gexf, graphml, json). JSON node ids stay ints (JSON
    has them typed); the XML formats give node ids as `node_type`."""
    if fmt == "gexf":
        return networkx.read_gexf(io.BytesIO(data), node_type=node_type)
    if fmt == "graphml":
        return networkx.read_graphml(io.BytesIO(data), node_type=node_type)
    return networkx.node_link_graph(json.loads(data), edges="edges")
