// Building elements without HTML strings: every piece of user data becomes a text node, so a
// title such as <img src=x onerror=...> is shown as those characters and never parsed.
export function h(tag, props = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === "dataset") Object.assign(element.dataset, value);
    else if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "class") element.className = value;
    else element[name] = value;
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

// A search snippet marks matches as [word]: the brackets become <mark> elements, the text stays text.
export function snippet(text) {
  const parts = [];
  const pattern = /\[([^\]]*)\]/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    parts.push(text.slice(last, match.index), h("mark", {}, match[1]));
    last = match.index + match[0].length;
  }
  parts.push(text.slice(last));
  return parts;
}
