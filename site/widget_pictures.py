"""A ppbook widget's first state as static HTML, for a page without a kernel (site/prepare.py).

An executed notebook keeps its widgets' state (nbclient stores it in the notebook's
metadata): :class:`Widgets` walks a widget's model tree from that state and draws each
control disabled at its value (sliders as ranges, dropdowns and toggles as their choice),
each HTML readout as it is, and each image (the PNG a ppbook explorer holds) inline, with
alt text made from the readout. An unknown control stops the build with one line, so a new
widget kind is drawn on purpose rather than dropped.
"""

from __future__ import annotations

import html
import re

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def text_of(markup: str) -> str:
    """Plain text of an HTML fragment, spaces collapsed."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", markup))).strip()


def png_tag(png_b64: str, width: str | int | None, alt: str) -> str:
    style = f"width:{width}px;max-width:100%;height:auto" if width else "max-width:100%"
    if isinstance(width, str) and not width.isdigit():
        style = f"width:{width};max-width:100%;height:auto"
    return (
        f'<img src="data:image/png;base64,{png_b64.strip()}" '
        f'alt="{html.escape(alt, quote=True)}" style="{style}">'
    )


class Widgets:
    """The first state of a notebook's widgets, drawn as static HTML."""

    def __init__(self, metadata: dict) -> None:
        self.models = metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})

    def model(self, reference: str) -> dict:
        return self.models[reference.removeprefix("IPY_MODEL_")]

    def width(self, state: dict) -> str | None:
        layout = state.get("layout")
        if isinstance(layout, str) and layout.startswith("IPY_MODEL_"):
            width = self.model(layout)["state"].get("width")
            return width.removesuffix("px") if width else None
        return None

    def readout(self, model_id: str) -> str:
        """The text of every HTML widget under ``model_id`` (the explorer's readout)."""
        model = self.models[model_id]
        state = model["state"]
        if model["model_name"] == "HTMLModel":
            return text_of(state.get("value", ""))
        return " ".join(
            self.readout(child.removeprefix("IPY_MODEL_")) for child in state.get("children", [])
        )

    def draw(self, model_id: str, alt: str) -> str:
        model = self.models[model_id]
        name, state = model["model_name"], model["state"]
        if name in {"VBoxModel", "HBoxModel", "BoxModel", "GridBoxModel"}:
            flow = "row wrap" if name == "HBoxModel" else "column"
            inner = "".join(
                self.draw(child.removeprefix("IPY_MODEL_"), alt)
                for child in state.get("children", [])
            )
            style = f"display:flex;flex-flow:{flow};gap:4px 16px"
            return f'<div class="ppbook-static-box" style="{style}">{inner}</div>'
        if name == "ImageModel":
            buffers = {tuple(b["path"]): b["data"] for b in model.get("buffers", [])}
            data = buffers.get(("value",))
            if not data:
                return ""
            return png_tag(data, self.width(state), alt)
        if name in {"HTMLModel", "HTMLMathModel", "LabelModel"}:
            value = state.get("value", "")
            shown = html.escape(value) if name == "LabelModel" else value
            return f'<div class="ppbook-static-readout">{shown}</div>'
        if name in {"IntSliderModel", "FloatSliderModel", "FloatLogSliderModel"}:
            label = html.escape(state.get("description", ""))
            value, low, high = state.get("value"), state.get("min"), state.get("max")
            step = state.get("step", 1)
            shown = format(value, state.get("readout_format", "")) if value is not None else ""
            return (
                f'<label class="ppbook-static-control">{label} '
                f'<input type="range" min="{low}" max="{high}" step="{step}" '
                f'value="{value}" disabled '
                f'aria-label="{label}"> <b>{html.escape(shown)}</b></label>'
            )
        if name in {"DropdownModel", "ToggleButtonsModel", "RadioButtonsModel", "SelectModel"}:
            label = html.escape(state.get("description", ""))
            labels = state.get("_options_labels", [])
            index = state.get("index")
            chosen = labels[index] if isinstance(index, int) and index < len(labels) else ""
            chosen = html.escape(str(chosen))
            return f'<span class="ppbook-static-control">{label} <b>{chosen}</b></span>'
        if name in {"CheckboxModel", "ToggleButtonModel"}:
            label = html.escape(state.get("description", ""))
            mark = "on" if state.get("value") else "off"
            return f'<span class="ppbook-static-control">{label}: <b>{mark}</b></span>'
        if name in {
            "IntTextModel",
            "FloatTextModel",
            "BoundedIntTextModel",
            "BoundedFloatTextModel",
            "TextModel",
        }:
            label = html.escape(state.get("description", ""))
            value = html.escape(str(state.get("value")))
            return f'<span class="ppbook-static-control">{label} <b>{value}</b></span>'
        if name in {"ButtonModel"}:
            return ""
        if name == "OutputModel":
            return "".join(output_html(o) for o in state.get("outputs", []))
        raise SystemExit(
            f"site: error: no static drawing for the widget model {name}; "
            "add it to site/prepare.py (Widgets.draw)"
        )

    def static(self, view: dict, note: str) -> dict:
        """A display_data output: the widget's first state under ``note`` (Markdown code
        spans allowed), which says how to run it live."""
        model_id = view["model_id"]
        alt = "First state of the explorer: " + (self.readout(model_id) or "its picture")
        body = self.draw(model_id, alt[:600])
        note = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(note))
        return {
            "output_type": "display_data",
            "metadata": {},
            "data": {
                "text/html": (
                    f'<div class="ppbook-static-widget"><p class="ppbook-live-note">{note}</p>'
                    f"{body}</div>"
                )
            },
        }


def output_html(output: dict) -> str:
    """An Output widget's captured output as HTML (text, HTML or a PNG)."""
    data = output.get("data", {})
    if "image/png" in data:
        return png_tag(data["image/png"], None, text_of(str(data.get("text/plain", "Figure"))))
    if "text/html" in data:
        return "".join(data["text/html"])
    if output.get("output_type") == "stream":
        return f"<pre>{html.escape(''.join(output.get('text', '')))}</pre>"
    if "text/plain" in data:
        return f"<pre>{html.escape(''.join(data['text/plain']))}</pre>"
    return ""
