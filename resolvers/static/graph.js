// The neighbourhood drawing: Cytoscape.js (vendored, see `make vendor`) with the explorer's
// styles. Nodes are facts coloured by category; edges are links labelled by type; a fact that
// was replaced (or forgotten) by the moment shown is faded with a dashed (or dotted) border.

import cytoscape from "./vendor/cytoscape-3.34.4.esm.min.mjs";

export const CATEGORY_COLOURS = {
  preference: "#8e44ad",
  fact: "#2471a3",
  decision: "#d35400",
  entity: "#1e8449",
  other: "#6c7a89",
};
const LABEL_CHARS = 60;
const MAX_FIT_ZOOM = 1.25;
const RING_GAP = 170; // between rings of the layout
const NODE_GAP = 120; // at least, between facts of a ring

const STYLE = [
  {
    selector: "node",
    style: {
      "background-color": "data(colour)",
      label: "data(label)",
      width: 26,
      height: 26,
      "border-width": 2,
      "border-color": "#ffffff",
      color: "#1b1f23",
      "font-size": 12,
      "text-wrap": "wrap",
      "text-max-width": 150,
      "text-valign": "bottom",
      "text-margin-y": 4,
      "text-background-color": "#ffffff",
      "text-background-opacity": 0.85,
      "text-background-padding": 2,
    },
  },
  { selector: "node.root", style: { width: 40, height: 40, "border-width": 4, "border-color": "#1b1f23" } },
  {
    selector: "node.superseded",
    style: { "background-opacity": 0.35, "border-style": "dashed", "border-color": "#4d5656", color: "#5d6d7e", "font-style": "italic" },
  },
  {
    selector: "node.forgotten",
    style: { "background-opacity": 0.35, "border-style": "dotted", "border-color": "#c0392b", color: "#922b21" },
  },
  // A halo, so the selection keeps the node's own border (root, replaced, forgotten).
  {
    selector: "node.selected",
    style: { "underlay-color": "#f1c40f", "underlay-opacity": 0.7, "underlay-padding": 7, "underlay-shape": "ellipse" },
  },
  {
    selector: "edge",
    style: {
      width: "mapData(strength, 0, 1, 1, 4)",
      "line-color": "#a6b1bd",
      "target-arrow-color": "#a6b1bd",
      "target-arrow-shape": "triangle",
      "curve-style": "bezier",
      label: "data(type)",
      "font-size": 9,
      color: "#34495e",
      "text-rotation": "autorotate",
      "text-background-color": "#ffffff",
      "text-background-opacity": 0.9,
      "text-background-padding": 1,
    },
  },
  { selector: "edge.SUPERSEDES", style: { "line-style": "dashed", "line-color": "#7f8c8d", "target-arrow-color": "#7f8c8d" } },
  { selector: "edge.selected", style: { "line-color": "#f1c40f", "target-arrow-color": "#f1c40f" } },
];

export class GraphView {
  /** handlers: onNode(id) on a click, onNodeTwice(id) on a double click, onEdge(id). */
  constructor(container, handlers) {
    this.cy = cytoscape({
      container,
      style: STYLE,
      minZoom: 0.2,
      maxZoom: 3,
      boxSelectionEnabled: false,
      autounselectify: true,
    });
    this.cy.on("tap", "node", (event) => handlers.onNode(event.target.id()));
    this.cy.on("dbltap", "node", (event) => handlers.onNodeTwice(event.target.id()));
    this.cy.on("tap", "edge", (event) => handlers.onEdge(event.target.id()));
  }

  /**
   * Replace the drawing. facts: the facts to draw; links: the links among them; root: the fact
   * the neighbourhood is drawn around; status(fact): "current", "superseded" or "forgotten".
   */
  draw({ facts, links, root, status }) {
    const positions = radial(root, facts, links);
    const elements = [
      ...facts.map((fact) => ({
        group: "nodes",
        data: {
          id: fact.id,
          label: short(fact.text),
          colour: CATEGORY_COLOURS[fact.category] || CATEGORY_COLOURS.other,
          category: fact.category,
          status: status(fact),
        },
        classes: [status(fact), fact.id === root ? "root" : ""].join(" ").trim(),
      })),
      ...links.map((link) => ({
        group: "edges",
        data: {
          id: link.id,
          source: link.sourceId,
          target: link.targetId,
          type: link.type,
          strength: link.strength,
        },
        classes: link.type,
      })),
    ];
    this.cy.batch(() => {
      this.cy.elements().remove();
      this.cy.add(elements);
    });
    this.cy.layout({ name: "preset", positions: (node) => positions.get(node.id()), fit: true, padding: 40 }).run();
    // A few facts would otherwise fill the canvas with giant labels.
    if (this.cy.zoom() > MAX_FIT_ZOOM) {
      this.cy.zoom(MAX_FIT_ZOOM);
      this.cy.center();
    }
  }

  /** Highlight the selected node or edge (null for none). */
  select(id) {
    this.cy.elements(".selected").removeClass("selected");
    if (id) this.cy.getElementById(id).addClass("selected");
  }

  resize() {
    this.cy.resize();
    this.cy.fit(undefined, 40);
  }
}

/**
 * A radial tree: the root in the middle, each fact on the ring of its distance in links from it
 * (direction ignored), in a wedge of its parent's wedge sized by the facts beyond it, so an
 * expanded fact grows outwards on its own side. Facts out of the root's reach take an outer ring.
 * Deterministic: the same graph is always drawn the same way.
 */
function radial(root, facts, links) {
  const next = new Map(facts.map((fact) => [fact.id, []]));
  for (const link of links) {
    next.get(link.sourceId)?.push(link.targetId);
    next.get(link.targetId)?.push(link.sourceId);
  }
  const children = new Map();
  const ring = new Map(next.has(root) ? [[root, 0]] : []);
  let frontier = [...ring.keys()];
  while (frontier.length) {
    const following = [];
    for (const id of frontier) {
      children.set(id, []);
      for (const other of next.get(id)) {
        if (ring.has(other)) continue;
        ring.set(other, ring.get(id) + 1);
        children.get(id).push(other);
        following.push(other);
      }
    }
    frontier = following;
  }
  const weight = new Map();
  const weigh = (id) => {
    const total = (children.get(id) ?? []).reduce((sum, child) => sum + weigh(child), 0);
    weight.set(id, Math.max(1, total));
    return weight.get(id);
  };
  const perRing = new Map();
  for (const depth of ring.values()) perRing.set(depth, (perRing.get(depth) ?? 0) + 1);
  const radius = (depth) =>
    depth === 0 ? 0 : Math.max(depth * RING_GAP, ((perRing.get(depth) ?? 1) * NODE_GAP) / (2 * Math.PI));
  const positions = new Map();
  const place = (id, from, to) => {
    const angle = (from + to) / 2;
    const r = radius(ring.get(id));
    positions.set(id, { x: r * Math.cos(angle), y: r * Math.sin(angle) });
    let start = from;
    for (const child of children.get(id) ?? []) {
      const share = ((to - from) * weight.get(child)) / weight.get(id);
      place(child, start, start + share);
      start += share;
    }
  };
  if (ring.has(root)) {
    weigh(root);
    place(root, -Math.PI / 2, (3 * Math.PI) / 2);
  }
  const outside = facts.filter((fact) => !ring.has(fact.id));
  const outer = (Math.max(0, ...ring.values()) + 1) * RING_GAP;
  outside.forEach((fact, i) => {
    const angle = (2 * Math.PI * i) / outside.length - Math.PI / 2;
    positions.set(fact.id, { x: outer * Math.cos(angle), y: outer * Math.sin(angle) });
  });
  return positions;
}

function short(text) {
  return text.length > LABEL_CHARS ? `${text.slice(0, LABEL_CHARS - 1)}…` : text;
}
