// The loop tree's front end (anywidget). It only draws the rows the Python side
// computed (model "rows", "selected", "targets", "drop_targets") and sends what the
// user did as messages: {type: "select" | "toggle", index}, {type: "key", key},
// {type: "drop", source, target}. What a key or a drop means is decided in Python.

const KEYS = ["ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "Home", "End"];
let counter = 0;

function span(cls, text) {
  const s = document.createElement("span");
  s.className = cls;
  s.textContent = text;
  return s;
}

function render({ model, el }) {
  const uid = `wb-looptree-${++counter}`;
  const root = document.createElement("div");
  root.className = "wb-looptree";
  root.tabIndex = 0;
  root.setAttribute("role", "tree");
  root.setAttribute("aria-label", "blocks and loops");
  // keys typed in the tree are the tree's, not the notebook's shortcuts
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  el.appendChild(root);

  let dragSource = null; // index of the loop row being dragged

  const legalDrops = (source) => {
    const all = model.get("drop_targets") || {};
    return all[String(source)] || [];
  };

  const clearDrag = () => {
    for (const r of root.querySelectorAll(
      ".wb-looptree-drop, .wb-looptree-droppable, .wb-looptree-dragging",
    )) {
      r.classList.remove("wb-looptree-drop", "wb-looptree-droppable", "wb-looptree-dragging");
    }
    dragSource = null;
  };

  function draw() {
    const rows = model.get("rows") || [];
    const selected = model.get("selected");
    const targets = new Set(model.get("targets") || []);
    root.replaceChildren();
    root.removeAttribute("aria-activedescendant");
    let selectedRow = null;
    for (const row of rows) {
      if (row.hidden) continue;
      const div = document.createElement("div");
      div.className = "wb-looptree-row";
      div.id = `${uid}-${row.index}`;
      div.dataset.name = row.name;
      div.dataset.kind = row.kind;
      div.dataset.block = row.block;  // the block a loop is above (a block: itself)
      div.dataset.index = String(row.index);
      div.setAttribute("role", "treeitem");
      div.setAttribute("aria-level", String(row.depth + 1));
      div.style.paddingLeft = `${0.3 + 1.1 * row.depth}em`;
      if (row.has_children) div.setAttribute("aria-expanded", String(row.expanded));
      if (row.index === selected) {
        div.classList.add("wb-looptree-selected");
        div.setAttribute("aria-selected", "true");
        root.setAttribute("aria-activedescendant", div.id);
        selectedRow = div;
      } else {
        div.setAttribute("aria-selected", "false");
      }
      if (targets.has(row.index)) div.classList.add("wb-looptree-target");

      if (row.has_children) {
        const t = span("wb-looptree-toggle", row.expanded ? "\u25be" : "\u25b8");
        t.title = row.expanded ? "collapse" : "expand";
        t.addEventListener("click", (e) => {
          e.stopPropagation();
          model.send({ type: "toggle", index: row.index });
        });
        div.appendChild(t);
      } else {
        div.appendChild(span("wb-looptree-spacer", ""));
      }
      if (row.kind === "block") {
        div.appendChild(span("wb-looptree-keyword", "block"));
        div.appendChild(span("wb-looptree-name", row.name));
        if (row.iter_kinds) div.appendChild(span("wb-looptree-extent", row.iter_kinds));
      } else {
        div.appendChild(span("wb-looptree-keyword", "for"));
        div.appendChild(span("wb-looptree-name", row.name));
        div.appendChild(span("wb-looptree-keyword", "in"));
        div.appendChild(span("wb-looptree-extent", `range(${row.extent ?? ""})`));
      }
      const badge = span(`wb-looptree-kind wb-looptree-kind-${row.kind}`, row.detail);
      if (row.parallel) badge.classList.add("wb-looptree-kind-annotated");
      div.appendChild(badge);
      div.title = row.kind === "block"
        ? `block ${row.name}: iter vars ${row.iter_kinds || "none"} (S spatial, R reduction)`
        : `for ${row.name} in range(${row.extent}): ${row.detail}` +
          " (drag onto a loop of the same chain to reorder)";

      div.addEventListener("click", () => {
        root.focus({ preventScroll: true });
        model.send({ type: "select", index: row.index });
      });

      if (row.kind === "loop") {
        div.draggable = true;
        div.addEventListener("dragstart", (e) => {
          e.stopPropagation();
          dragSource = row.index;
          e.dataTransfer.effectAllowed = "move";
          e.dataTransfer.setData("text/plain", row.name);
          div.classList.add("wb-looptree-dragging");
          const legal = legalDrops(row.index);
          for (const r of root.querySelectorAll(".wb-looptree-row")) {
            if (legal.includes(Number(r.dataset.index))) r.classList.add("wb-looptree-droppable");
          }
        });
        div.addEventListener("dragend", clearDrag);
      }
      const accepts = () => dragSource !== null && row.kind === "loop" &&
        legalDrops(dragSource).includes(row.index);
      div.addEventListener("dragenter", (e) => {
        if (!accepts()) return;
        e.preventDefault();
        e.stopPropagation();
        div.classList.add("wb-looptree-drop");
      });
      div.addEventListener("dragover", (e) => {
        if (!accepts()) return;
        e.preventDefault();
        e.stopPropagation();
        e.dataTransfer.dropEffect = "move";
        div.classList.add("wb-looptree-drop");
      });
      div.addEventListener("dragleave", (e) => {
        if (!div.contains(e.relatedTarget)) div.classList.remove("wb-looptree-drop");
      });
      div.addEventListener("drop", (e) => {
        if (!accepts()) return;
        e.preventDefault();
        e.stopPropagation();
        const source = dragSource;
        clearDrag();
        model.send({ type: "drop", source, target: row.index });
      });
      root.appendChild(div);
    }
    if (rows.length === 0) root.appendChild(span("wb-looptree-empty", "(no blocks)"));
    if (selectedRow && typeof selectedRow.scrollIntoView === "function") {
      selectedRow.scrollIntoView({ block: "nearest" });
    }
  }

  root.addEventListener("keydown", (e) => {
    if (!KEYS.includes(e.key) || e.altKey || e.ctrlKey || e.metaKey) return;
    e.preventDefault();
    e.stopPropagation();
    model.send({ type: "key", key: e.key });
  });

  const names = ["rows", "selected", "targets", "drop_targets"];
  for (const n of names) model.on(`change:${n}`, draw);
  draw();
  return () => {
    for (const n of names) model.off(`change:${n}`, draw);
  };
}

export default { render };
