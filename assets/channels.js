// Channels: the add form shows only the settings of the chosen type (without this script every
// type's settings show, each under its own heading, and the server reads only the chosen type's).
// A hidden type's fieldset is also disabled, so its fields are not sent.
"use strict";
for (const select of document.querySelectorAll("select[data-type-select]")) {
  const form = select.form;
  if (!form) continue;
  const show = () => {
    for (const fs of form.querySelectorAll("fieldset[data-type]")) {
      const on = fs.getAttribute("data-type") === select.value;
      fs.hidden = !on;
      fs.disabled = !on;
    }
  };
  select.addEventListener("change", show);
  show();
}
// Maintenance: the add form shows the one-off or the recurring fields, as chosen.
for (const radios of document.querySelectorAll("[data-schedule-choice]")) {
  const form = radios.closest("form");
  if (!form) continue;
  const show = () => {
    const chosen = form.querySelector("input[name=schedule]:checked");
    for (const fs of form.querySelectorAll("fieldset[data-schedule]")) {
      const on = !chosen || fs.getAttribute("data-schedule") === chosen.value;
      fs.hidden = !on;
      fs.disabled = !on;
    }
  };
  for (const r of radios.querySelectorAll("input[name=schedule]")) r.addEventListener("change", show);
  show();
}
