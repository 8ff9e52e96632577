// The reorder list's front end (anywidget): one row per loop of the chain with up and
// down buttons. A press sends {type: "move", index, delta}; the new order comes back
// from Python as "value", so a loop can never be dropped or repeated.

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "wb-reorder";
  root.setAttribute("role", "list");
  root.setAttribute("aria-label", "loop order, outermost first");
  el.appendChild(root);
  let refocus = null; // {name, which}: keep the focus on the moved loop's button

  function button(cls, text, label, disabled, onClick) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = `wb-reorder-button ${cls}`;
    b.textContent = text;
    b.title = label;
    b.setAttribute("aria-label", label);
    b.disabled = disabled;
    b.addEventListener("click", onClick);
    return b;
  }

  function draw() {
    const order = model.get("value") || [];
    root.replaceChildren();
    order.forEach((name, index) => {
      const row = document.createElement("div");
      row.className = "wb-reorder-item";
      row.dataset.name = name;
      row.setAttribute("role", "listitem");
      const pos = document.createElement("span");
      pos.className = "wb-reorder-position";
      pos.textContent = `${index + 1}.`;
      const label = document.createElement("span");
      label.className = "wb-reorder-name";
      label.textContent = name;
      const move = (delta, which) => () => {
        refocus = { name, which };
        model.send({ type: "move", index, delta });
      };
      row.append(
        pos,
        label,
        button("wb-reorder-up", "\u2191", `move ${name} out (up)`, index === 0,
          move(-1, "wb-reorder-up")),
        button("wb-reorder-down", "\u2193", `move ${name} in (down)`,
          index === order.length - 1, move(1, "wb-reorder-down")),
      );
      root.appendChild(row);
    });
    if (refocus) {
      const row = [...root.children].find((r) => r.dataset.name === refocus.name);
      const b = row && row.querySelector(`.${refocus.which}`);
      if (b && !b.disabled) b.focus();
      refocus = null;
    }
  }

  model.on("change:value", draw);
  draw();
  return () => model.off("change:value", draw);
}

export default { render };
