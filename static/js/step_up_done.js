// The end of a step-up at the identity provider, in the window the decision opened
// (static/js/passkey.js): closing it lets the decision go on. Opened any other way,
// the page just says where to go.
if (window.opener) window.close();
