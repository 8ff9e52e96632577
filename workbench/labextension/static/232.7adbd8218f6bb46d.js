"use strict";(self.rspackChunkschedule_workbench=self.rspackChunkschedule_workbench||[]).push([[232],{475(e,r,o){var t=o(601),a=o.n(t),n=o(314),i=(o.n(n))()(a());i.push([e.id,`/* Schedule Workbench viewers. JupyterLab's theme variables keep them readable
   in light and dark themes. */

.wb-schedule-viewer,
.wb-db-viewer {
  overflow: auto;
  padding: 8px 12px;
  font-family: var(--jp-ui-font-family);
  font-size: var(--jp-ui-font-size1);
  color: var(--jp-ui-font-color1);
  background: var(--jp-layout-color1);
  outline: none;
}

.wb-viewer-message {
  padding: 16px;
  color: var(--jp-ui-font-color2);
  white-space: pre-wrap;
}

.wb-viewer-header,
.wb-db-header {
  display: flex;
  flex-wrap: wrap;
  gap: 4px 12px;
  align-items: baseline;
  margin-bottom: 8px;
}

.wb-viewer-title,
.wb-db-title {
  font-weight: 600;
  font-size: var(--jp-ui-font-size2);
}

.wb-viewer-facts,
.wb-db-facts {
  color: var(--jp-ui-font-color2);
}

.wb-viewer-warning,
.wb-viewer-note {
  flex-basis: 100%;
  padding: 4px 8px;
  border-left: 3px solid var(--jp-warn-color1);
  background: var(--jp-layout-color2);
}

.wb-viewer-note {
  border-left-color: var(--jp-brand-color1);
}

.wb-viewer-function,
.wb-viewer-diff {
  margin: 4px 0;
  padding: 6px;
  font-family: var(--jp-code-font-family);
  font-size: var(--jp-code-font-size);
  line-height: var(--jp-code-line-height);
  background: var(--jp-layout-color2);
  overflow-x: auto;
  white-space: pre;
}

.wb-viewer-function {
  max-height: 30vh;
  overflow-y: auto;
}

.wb-viewer-body {
  display: flex;
  gap: 12px;
  align-items: flex-start;
  margin-top: 8px;
}

.wb-viewer-steps {
  flex: 0 0 38%;
  max-height: 70vh;
  overflow: auto;
  margin: 0;
  padding-left: 2.5em;
  font-family: var(--jp-code-font-family);
  font-size: var(--jp-code-font-size);
}

.wb-viewer-step {
  padding: 2px 4px;
  cursor: pointer;
  border-radius: 2px;
  word-break: break-word;
}

.wb-viewer-step:hover {
  background: var(--jp-layout-color2);
}

.wb-viewer-step-selected,
.wb-viewer-step-selected:hover {
  background: var(--jp-brand-color3);
  color: var(--jp-ui-font-color0);
}

.wb-viewer-detail {
  flex: 1 1 auto;
  min-width: 0;
}

.wb-viewer-step-title {
  font-weight: 600;
  margin-bottom: 4px;
}

.wb-viewer-diff-summary,
.wb-viewer-noir {
  color: var(--jp-ui-font-color2);
}

.wb-diff-add {
  background: var(--jp-success-color3, #c8e6c9);
  color: var(--jp-ui-font-color0);
}

.wb-diff-del {
  background: var(--jp-error-color3, #ffcdd2);
  color: var(--jp-ui-font-color0);
  text-decoration: line-through;
  text-decoration-color: var(--jp-error-color1);
}

.wb-db-plot {
  display: block;
  max-width: 100%;
  height: auto;
  margin: 4px 0 12px;
}

.wb-db-axis {
  stroke: var(--jp-ui-font-color2);
}

.wb-db-grid {
  stroke: var(--jp-border-color2);
  stroke-dasharray: 2 3;
}

.wb-db-tick,
.wb-db-label {
  fill: var(--jp-ui-font-color2);
  font-size: 11px;
}

.wb-db-point {
  fill: var(--jp-brand-color1);
  fill-opacity: 0.75;
}

.wb-db-point.wb-db-noisy {
  fill: var(--jp-warn-color1);
}

.wb-db-point.wb-db-fail {
  stroke: var(--jp-error-color1);
  stroke-width: 2;
  fill: none;
}

.wb-db-best {
  stroke: var(--jp-success-color1);
  stroke-width: 2;
}

.wb-db-table {
  border-collapse: collapse;
  font-size: var(--jp-ui-font-size1);
}

.wb-db-table th,
.wb-db-table td {
  padding: 2px 8px;
  border-bottom: 1px solid var(--jp-border-color2);
  text-align: left;
}

.wb-db-table td:nth-child(4),
.wb-db-table td:nth-child(5) {
  text-align: right;
  font-variant-numeric: tabular-nums;
}

.wb-db-failed {
  color: var(--jp-error-color1);
}

.wb-db-best-row {
  font-weight: 600;
}

.wb-db-problems {
  flex-basis: 100%;
  color: var(--jp-warn-color0);
}

.wb-picker label {
  display: inline-block;
  margin: 4px 12px 4px 0;
}

.wb-picker-size input {
  width: 6em;
}
`,""]),o.d(r,{},{A:i})},314(e){e.exports=function(e){var r=[];return r.toString=function(){return this.map(function(r){var o="",t=void 0!==r[5];return r[4]&&(o+="@supports (".concat(r[4],") {")),r[2]&&(o+="@media ".concat(r[2]," {")),t&&(o+="@layer".concat(r[5].length>0?" ".concat(r[5]):""," {")),o+=e(r),t&&(o+="}"),r[2]&&(o+="}"),r[4]&&(o+="}"),o}).join("")},r.i=function(e,o,t,a,n){"string"==typeof e&&(e=[[null,e,void 0]]);var i={};if(t)for(var l=0;l<this.length;l++){var c=this[l][0];null!=c&&(i[c]=!0)}for(var s=0;s<e.length;s++){var p=[].concat(e[s]);t&&i[p[0]]||(void 0!==n&&(void 0===p[5]||(p[1]="@layer".concat(p[5].length>0?" ".concat(p[5]):""," {").concat(p[1],"}")),p[5]=n),o&&(p[2]&&(p[1]="@media ".concat(p[2]," {").concat(p[1],"}")),p[2]=o),a&&(p[4]?(p[1]="@supports (".concat(p[4],") {").concat(p[1],"}"),p[4]=a):p[4]="".concat(a)),r.push(p))}},r}},601(e){e.exports=function(e){return e[1]}},72(e){var r=[];function o(e){for(var o=-1,t=0;t<r.length;t++)if(r[t].identifier===e){o=t;break}return o}function t(e,t){for(var a={},n=[],i=0;i<e.length;i++){var l=e[i],c=t.base?l[0]+t.base:l[0],s=a[c]||0,p="".concat(c," ").concat(s);a[c]=s+1;var d=o(p),b={css:l[1],media:l[2],sourceMap:l[3],supports:l[4],layer:l[5]};if(-1!==d)r[d].references++,r[d].updater(b);else{var u=function(e,r){var o=r.domAPI(r);return o.update(e),function(r){r?(r.css!==e.css||r.media!==e.media||r.sourceMap!==e.sourceMap||r.supports!==e.supports||r.layer!==e.layer)&&o.update(e=r):o.remove()}}(b,t);t.byIndex=i,r.splice(i,0,{identifier:p,updater:u,references:1})}n.push(p)}return n}e.exports=function(e,a){var n=t(e=e||[],a=a||{});return function(e){e=e||[];for(var i=0;i<n.length;i++){var l=o(n[i]);r[l].references--}for(var c=t(e,a),s=0;s<n.length;s++){var p=o(n[s]);0===r[p].references&&(r[p].updater(),r.splice(p,1))}n=c}}},659(e){var r={};e.exports=function(e,o){var t=function(e){if(void 0===r[e]){var o=document.querySelector(e);if(window.HTMLIFrameElement&&o instanceof window.HTMLIFrameElement)try{o=o.contentDocument.head}catch(e){o=null}r[e]=o}return r[e]}(e);if(!t)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");t.appendChild(o)}},540(e){e.exports=function(e){var r=document.createElement("style");return e.setAttributes(r,e.attributes),e.insert(r,e.options),r}},56(e,r,o){e.exports=function(e){var r=o.nc;r&&e.setAttribute("nonce",r)}},825(e){e.exports=function(e){if("u"<typeof document)return{update:function(){},remove:function(){}};var r=e.insertStyleElement(e);return{update:function(o){var t,a,n;t="",o.supports&&(t+="@supports (".concat(o.supports,") {")),o.media&&(t+="@media ".concat(o.media," {")),(a=void 0!==o.layer)&&(t+="@layer".concat(o.layer.length>0?" ".concat(o.layer):""," {")),t+=o.css,a&&(t+="}"),o.media&&(t+="}"),o.supports&&(t+="}"),(n=o.sourceMap)&&"u">typeof btoa&&(t+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),e.styleTagTransform(t,r,e.options)},remove:function(){var e;null===(e=r).parentNode||e.parentNode.removeChild(e)}}}},113(e){e.exports=function(e,r){if(r.styleSheet)r.styleSheet.cssText=e;else{for(;r.firstChild;)r.removeChild(r.firstChild);r.appendChild(document.createTextNode(e))}}},579(e,r,o){var t=o(72),a=o.n(t),n=o(825),i=o.n(n),l=o(659),c=o.n(l),s=o(56),p=o.n(s),d=o(540),b=o.n(d),u=o(113),f=o.n(u),v=o(475),w={};w.styleTagTransform=f(),w.setAttributes=p(),w.insert=c().bind(null,"head"),w.domAPI=i(),w.insertStyleElement=b(),a()(v.A,w),v.A&&v.A.locals&&v.A.locals}}]);