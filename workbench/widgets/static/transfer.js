// Front end of workbench.widgets.transfer.Transfer: files between the kernel and the
// user's computer, without the server's disk.
//
// - Python sends {type: "wb-download", id, name, text}: the text is saved on the user's
//   computer as `name` (a Blob behind a temporary <a download>). When the widget is shown
//   in several places, only the first view handles a given id.
// - The "Upload" button opens a file dialog (a hidden <input type=file>); the chosen file
//   is read as text and sent as {type: "wb-upload", name, text}. A file larger than
//   `max_bytes` is refused here ({type: "wb-upload-error", name, size}) and never read.

const seen = (globalThis.__wbTransferSeen ??= new Set());

function download(name, text) {
  const blob = new Blob([text], { type: "application/json;charset=utf-8" });
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.style.display = "none";
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

function render({ model, el }) {
  el.classList.add("wb-transfer", "wb-upload");

  const input = document.createElement("input");
  input.type = "file";
  input.style.display = "none";

  const button = document.createElement("button");
  button.type = "button";
  button.className = "jupyter-button widget-button wb-upload-button";
  button.style.width = "auto";
  const icon = document.createElement("i");
  icon.className = "fa fa-upload";
  const label = document.createElement("span");
  button.append(icon, label);

  const sync = () => {
    label.textContent = " " + model.get("label");
    button.title = model.get("button_tooltip");
    input.accept = model.get("accept");
    button.disabled = model.get("disabled");
  };
  sync();
  for (const name of ["label", "button_tooltip", "accept", "disabled"]) {
    model.on(`change:${name}`, sync);
  }

  button.addEventListener("click", () => input.click());
  input.addEventListener("change", () => {
    const file = input.files && input.files[0];
    input.value = ""; // choosing the same file again fires "change" again
    if (!file) return;
    const limit = model.get("max_bytes");
    if (file.size > limit) {
      model.send({ type: "wb-upload-error", name: file.name, size: file.size });
      return;
    }
    const reader = new FileReader();
    reader.onload = () => {
      model.send({ type: "wb-upload", name: file.name, text: String(reader.result) });
    };
    reader.onerror = () => {
      model.send({ type: "wb-upload-error", name: file.name, size: file.size,
                   reason: String(reader.error) });
    };
    reader.readAsText(file, "utf-8");
  });

  const onMessage = (msg) => {
    if (!msg || msg.type !== "wb-download" || seen.has(msg.id)) return;
    seen.add(msg.id);
    download(msg.name, msg.text);
  };
  model.on("msg:custom", onMessage);

  el.append(button, input);
  return () => model.off("msg:custom", onMessage);
}

export default { render };
